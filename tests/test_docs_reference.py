"""The API reference as mkdocs renders it: no Sphinx role or ``>>>`` example shown as plain text, and
every field of the API's dataclasses documented.

The site is built as CI builds it (``mkdocs build --strict``, mkdocs.yml); the test skips only when
mkdocs is not installed (the dev extra installs it).
"""

from __future__ import annotations

import dataclasses
import html
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

ROLE = re.compile(r":(func|class|meth|mod|attr|exc|data|obj):\s*\S")
LITERAL_MARK = re.compile(r"[^\s:]::(?=\s|$)")  # reST's "text::" before a literal block
PRE = re.compile(r"<pre\b.*?</pre>", re.S)
TAG = re.compile(r"<[^>]+>")
# A doctest outside a docstring's "Examples:" section is Markdown: its ">>>" become nested blockquotes.
QUOTE = re.compile(r"<blockquote>(.*?)</blockquote>", re.S)


def article(page_html: str) -> str:
    return page_html[page_html.find("<article"):page_html.find("</article>")]


def text(fragment: str) -> str:
    """What a reader sees of an HTML fragment: the tags dropped, the entities decoded."""
    return html.unescape(TAG.sub("", fragment))


def literal_markup(page_html: str) -> list[str]:
    """The Sphinx roles, reST ``::`` marks, doctest prompts and quoted examples a page shows outside its code blocks."""
    body = PRE.sub("", article(page_html))
    shown = text(body)
    found = [m.start() for pattern in (ROLE, LITERAL_MARK, re.compile(">>>")) for m in pattern.finditer(shown)]
    contexts = [" ".join(shown[max(0, i - 40):i + 60].split()) for i in sorted(found)]
    return contexts + ["blockquote: " + " ".join(text(m.group(1)).split())[:100] for m in QUOTE.finditer(body)]


def test_literal_markup_is_found():
    """The check itself: a role, a prompt or a quoted example outside a code block is caught, one inside is not."""
    page = ('<article><p>see :func:<code>mallocgame.solve</code></p><p>&gt;&gt;&gt; x = 1</p>'
            '<blockquote><blockquote><p>y = 2</p></blockquote></blockquote><p>a method::</p>'
            '<pre><code>&gt;&gt;&gt; y = :class:`Z`</code></pre></article>')
    found = literal_markup(page)
    assert len(found) == 4, found
    assert ":func:mallocgame.solve" in found[0] and ">>> x = 1" in found[1] and "a method::" in found[2]
    assert "y = 2" in found[3]
    clean = "<article><p>[solve] and <code>validate</code>, a::b</p><pre>&gt;&gt;&gt; 1 method::</pre></article>"
    assert literal_markup(clean) == []


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_reference_pages_show_no_literal_roles_or_prompts(site):
    pages = sorted((site / "reference").glob("*/index.html"))
    assert len(pages) >= 5, pages
    shown = {page.parent.name: literal_markup(page.read_text()) for page in pages}
    assert not any(shown.values()), {name: found for name, found in shown.items() if found}


def test_api_page_documents_result_report_verdict_and_plot(site):
    page = (site / "reference" / "api" / "index.html").read_text()
    for name in ("mallocgame.api.Result", "mallocgame.engine.report.Report", "mallocgame.api.Verdict", "mallocgame.api.plot"):
        assert f'id="{name}"' in page, name
    assert "<code>&gt;&gt;&gt;" not in page and '<span class="gp">&gt;&gt;&gt; </span>' in page  # examples as code


@pytest.mark.parametrize("name", ["mallocgame.api.Result", "mallocgame.engine.report.Report", "mallocgame.api.Verdict",
                                  "mallocgame.api.SolverInfo"])
def test_every_field_is_in_the_attributes_section(name):
    griffe = pytest.importorskip("griffe")
    import importlib

    module, _, cls_name = name.rpartition(".")
    cls = getattr(importlib.import_module(module), cls_name)
    sections = griffe.Docstring(cls.__doc__, parser="google").parse()
    documented = [a.name for s in sections if s.kind.value == "attributes" for a in s.value]
    assert documented == [f.name for f in dataclasses.fields(cls)]
