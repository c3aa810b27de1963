"""Jinja templates of the reference backend, loaded by name with StrictUndefined."""

from pathlib import Path

from dicp.api import render as render_template

TEMPLATE_DIR = Path(__file__).parent / "templates"
INCLUDE_DIR = Path(__file__).parent / "include"


def render(template_name, **context):
    return render_template(TEMPLATE_DIR, template_name, **context)
