"""The project's model gets exactly the options the app gives it, on every load path."""

from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def test_the_model_gets_the_apps_options(et):
    checked = et.check_program(HERE / "programs" / "model.pte", HERE / "maps" / "app.yaml")
    checked.raise_for_differences()
    assert checked.results, "the program was loaded on no path"
