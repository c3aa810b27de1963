"""Jinja templates of the reference backend, loaded by name with StrictUndefined."""
from pathlib import Path

from dicp.bridge.pipeline import templating

TEMPLATE_DIR = Path(__file__).parent / "templates"
INCLUDE_DIR = Path(__file__).parent / "include"


def render(template_name, **context):
    return templating.render(TEMPLATE_DIR, template_name, **context)
