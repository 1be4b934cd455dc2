"""jsonschema's IRI grammar (`rfc3987_syntax`) is built at its first use, not in every kernel that shows a figure
nor in a batch's own process, and jsonschema's `iri` checkers answer as the real module does. Each case is a fresh
Python: the test workers have imported jsonschema long before."""

import importlib.util
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("rfc3987_syntax") is None,
                                reason="rfc3987_syntax is not installed (it comes with JupyterLab): nothing to defer")

WATCHED = ("jsonschema", "nbformat", "rfc3987_syntax.syntax_helpers")
LOADED = f"import sys\nprint(sorted(m for m in {WATCHED!r} if m in sys.modules))\n"  # the watched modules imported


def fresh(code: str) -> str:
    """What `code` prints in a fresh Python."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_a_kernel_that_shows_a_figure_imports_jsonschema_without_the_grammar():
    shown = fresh("from colloc_kit.views import plots\nplots.use_renderer('plotly_mimetype')\n"
                  "bundle = plots.empty('t', 'nothing')._repr_mimebundle_()\n"
                  "assert 'application/vnd.plotly.v1+json' in bundle\n" + LOADED)
    assert shown.strip() == "['jsonschema', 'nbformat']"


def test_a_batch_reads_its_notebooks_without_the_grammar():
    planned = fresh("from colloc_kit.batch import runner\n"
                    "assert runner.plan('cpu-smoke', runner.load_profiles(), runner.default_notebooks_dir())\n"
                    + LOADED)
    assert planned.strip() == "['jsonschema', 'nbformat']"


def test_the_iri_checkers_answer_as_jsonschemas_own_and_the_module_imported_after_is_the_real_one():
    values = ["https://example.org/a?b#c", "http://example.org/\u00e9t\u00e9", "urn:isbn:0451450523", "//host/path",
              "a b", "no iri", "http://[::1]:80/", "http://[::1", "", "#frag"]
    check = ("from jsonschema import FormatChecker\nchecker = FormatChecker()\n"
             f"print([[checker.conforms(v, f) for f in ('iri', 'iri-reference')] for v in {values!r}])\n")
    own = fresh(check)  # jsonschema as it comes: the grammar built at its import
    deferred = fresh("from colloc_kit.views import deferred_iri\ndeferred_iri.defer()\n" + LOADED + check
                     + "import rfc3987_syntax\nprint(hasattr(rfc3987_syntax, 'syntax_parser'))")
    unloaded, answers, real = deferred.splitlines()
    assert unloaded == "['jsonschema']" and real == "True"
    assert answers == own.strip() and "True" in own and "False" in own
