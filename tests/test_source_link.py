"""A node's source line links to the model's code: the Details tab's button opens the
Code tab on the user's own source around that line, marked."""
from __future__ import annotations

import html
import inspect
import re

import pytest
import torch
from torch import nn

from fxviz.widgets import explore
from fxviz.widgets.panel_code import source_html


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        return torch.relu(y)  # RELU


RELU_LINE = inspect.getsourcelines(Net.forward)[1] + 2


def marked_text(page: str) -> str:
    """The text of the marked (``.hll``) line of highlighted HTML."""
    mark = re.search(r'<span class="hll">(.*?)\n', page)
    assert mark, "no marked line"
    return html.unescape(re.sub(r"<[^>]+>", "", mark.group(1)))


@pytest.fixture
def explorer():
    widget = explore(Net(), torch.randn(2, 3), tracer="export", profile="off")
    yield widget
    widget.close()


def test_details_show_a_link_to_the_nodes_model_line(explorer):
    explorer.select("relu")
    assert explorer.details.source.layout.display is None
    assert explorer.details.source.description == f"model code at test_source_link.py:{RELU_LINE}"
    explorer.select("x")  # an input has no source line: no link
    assert explorer.details.source.layout.display == "none"


def test_clicking_the_link_shows_the_model_code_with_the_line_marked(explorer):
    explorer.select("relu")
    explorer.details.source.click()
    assert explorer.tabs.selected_index == 1 and explorer.code.source.value
    page = explorer.code.view.html
    assert "return torch.relu(y)  # RELU" in marked_text(page)
    assert f"test_source_link.py:{RELU_LINE}" in page
    assert "def forward(self, x):" in html.unescape(re.sub(r"<[^>]+>", "", page))  # context around it
    explorer.select("linear")  # the source view follows the selection
    assert "y = self.lin(x)" in marked_text(explorer.code.view.html)


def test_diff_and_source_are_one_view_at_a_time(explorer):
    explorer.select("relu")
    explorer.details.source.click()
    explorer.code.diff.value = True
    assert not explorer.code.source.value
    explorer.code.source.value = True
    assert not explorer.code.diff.value
    explorer.select("x")
    assert "has no source line" in explorer.code.view.html


def test_source_html_escapes_and_says_when_the_file_is_gone(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("a = 1\nb = '<script>'\nc = 3\n")
    page = source_html(f"{path}:2", context=1)
    assert "<script>" not in page and "b = " in marked_text(page)
    assert "not readable here" in source_html(f"{tmp_path / 'gone.py'}:3")
