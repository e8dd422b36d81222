"""The formgrader's "Generate Feedback" writes the course's feedback page, as ``nbgrader generate_feedback`` does.

nbgrader 0.9.6's formgrader API (``NbGraderAPI.generate_feedback``) sets
``HTMLExporter.template_name = "feedback"`` over the course config, so the
feedback generated from the formgrader would be nbgrader's English page that
loads MathJax from a CDN, not the course's Chinese offline page
(``grading/templates/feedback_offline``).  :func:`install`, called by the
repository's ``nbgrader_config.py`` and the class's
``grading/hub/nbgrader_config.py``, makes that API build
:class:`CourseFeedback`, which keeps the template the course config names.
"""

from __future__ import annotations

import copy

from nbgrader.apps import api
from nbgrader.converters import GenerateFeedback

#: The template nbgrader's formgrader asks for.
NBGRADER_TEMPLATE = "feedback"


def configured_template(config) -> str | None:
    """``HTMLExporter.template_name`` in a traitlets config, without creating the section."""
    section = config.get("HTMLExporter") if "HTMLExporter" in config else None
    return section.get("template_name") if section is not None and "template_name" in section else None


class CourseFeedback(GenerateFeedback):
    """nbgrader's ``GenerateFeedback`` that keeps the configured template when asked for nbgrader's own."""

    def update_config(self, config) -> None:
        configured = configured_template(self.config)
        if configured and configured_template(config) == NBGRADER_TEMPLATE:
            config = copy.deepcopy(config)
            config.HTMLExporter.template_name = configured
        super().update_config(config)


def install() -> None:
    """Make the formgrader's API generate feedback with :class:`CourseFeedback` (idempotent)."""
    api.GenerateFeedback = CourseFeedback
