"""Keep ``--device /abs/x.yaml`` (and other path options) from moving pytest's rootdir.

pytest settles its rootdir and configuration file from the command line's test
paths *before* it loads plugins from entry points, so at that moment it does not
know ``--device``, ``--results-dir`` or ``--html-report`` take a value: in
``--device /abs/dir/x.yaml`` the path looks like a test path. The rootdir then
becomes ``/abs/dir``, the project's ``pyproject.toml`` is not found, its
``testpaths`` are lost and pytest collects whatever is in the current directory.
(``--device=/abs/...`` is not affected: pytest sees one unknown option.)

As soon as the plugin's options are known (``pytest_load_initial_conftests``,
before any conftest, test path or ini value is used), :func:`settle_rootdir`
determines the setup again from the real test paths and, where it differs, puts
pytest's own answer for those in place. This touches pytest internals (the
rootdir and ini attributes of ``Config``); if they are not as expected, the run
stops with a usage error that says to write ``--option=PATH`` instead.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

_FIX = (
    "pytest took a path given to a harness option (e.g. --device PATH) for a test path "
    "and would collect from the wrong root; write the option as --device=PATH "
    "(likewise --results-dir=PATH, --html-report=PATH)"
)


def settle_rootdir(config: pytest.Config, args: list[str]) -> None:
    """Redo pytest's rootdir and ini choice with the harness's options known.

    ``args`` is the argument list pytest goes on to parse; ``addopts`` of the
    configuration file found now are put in front, as pytest itself does.
    """
    try:
        from _pytest.config.findpaths import determine_setup

        ns = config.known_args_namespace
        rootpath, inipath, inicfg, ignored = determine_setup(
            inifile=ns.inifilename,
            override_ini=ns.override_ini,
            args=ns.file_or_dir,
            rootdir_cmd_arg=ns.rootdir or None,
            invocation_dir=config.invocation_params.dir,
        )
        if (rootpath, inipath) == (config.rootpath, config.inipath):
            return
        _replace_setup(config, args, rootpath, inipath, inicfg, ignored)
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        raise pytest.UsageError(f"{_FIX} ({type(exc).__name__}: {exc})") from None


def _replace_setup(
    config: pytest.Config, args: list[str], rootpath: Any, inipath: Any, inicfg: Any, ignored: Any
) -> None:
    config._rootpath = rootpath
    config._inipath = inipath
    config._inicfg = inicfg
    config._ignored_config_files = ignored
    config._inicache.clear()
    config._parser.extra_info["rootdir"] = str(rootpath)
    config._parser.extra_info["inifile"] = str(inipath)
    addopts = config.getini("addopts")
    if addopts:
        args[:] = [*addopts, *args]
    ns = config._parser.parse_known_args(args, namespace=copy.copy(config.option))
    if ns.confcutdir is None:  # pytest's default, as it sets it
        ns.confcutdir = str(inipath.parent if inipath else rootpath)
    config.known_args_namespace = ns
