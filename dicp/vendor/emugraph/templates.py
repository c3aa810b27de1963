"""Jinja templates of emugraph's device layer, loaded by name with StrictUndefined."""

from pathlib import Path

from dicp.api import render as render_template

TEMPLATE_DIR = Path(__file__).parent / "templates"


def render(template_name, **context):
    return render_template(TEMPLATE_DIR, template_name, **context)
