"""The user guides' Python examples run as written: every ```python block of each guide,
in order, in one namespace per guide (see snippets.py; ```python-norun blocks are shown,
not run)."""
import pytest

from snippets import ROOT, fenced_blocks, run_python_blocks

GUIDES = ["docs/python.md", "docs/migrating.md", "docs/attention.md", "docs/solve_grad.md", "docs/sparse_weights.md"]
# Info strings a guide may use; anything else that starts with "py" would silently not run.
SHOWN_ONLY = {"python-norun", "text", "sh", "cpp", "cmake", ""}


@pytest.mark.parametrize("guide", GUIDES)
@pytest.mark.filterwarnings("ignore:Sparse (CSR|BSR) tensor support is in beta state:UserWarning")
def test_guide_examples_run(guide):
    run_python_blocks(ROOT / guide)


@pytest.mark.parametrize("guide", GUIDES)
def test_guide_fences_are_known(guide):
    for info, line, _code in fenced_blocks(ROOT / guide):
        assert info == "python" or info in SHOWN_ONLY, f"{guide}:{line}: unknown fence ```{info}"
