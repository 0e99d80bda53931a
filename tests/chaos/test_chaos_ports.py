"""The chaos run takes no port of `make run` (issue 21, 4): every listener sluice-dev can start
gets a free port, or none (0), in the environment the driver gives it. The variables and their
defaults are read from sluice-dev's own options, so a listener added there is checked here."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import sluice_cli.dev

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `chaos` is a top-level package of the repository, not installed
    sys.path.insert(0, str(ROOT))

from chaos.driver import dev_environment  # noqa: E402 - after the path above

PORT_OPTION = re.compile(r'_env_int\("(SLUICE_DEV_\w+_PORT)",\s*(\d+)\)')


def test_every_port_sluice_dev_listens_on_is_free_or_off_in_a_chaos_run(tmp_path):
    defaults = {name: int(port) for name, port in PORT_OPTION.findall(inspect.getsource(sluice_cli.dev))}
    assert {"SLUICE_DEV_INGEST_PORT", "SLUICE_DEV_WEBHOOKS_PORT", "SLUICE_DEV_SOURCES_PORT"} <= set(defaults), defaults
    env = dev_environment(tmp_path, 2, {})
    missing = sorted(name for name in defaults if name not in env)
    assert not missing, f"the chaos run leaves sluice-dev on its default port (make run's) for {missing}"
    for name, default in defaults.items():
        assert env[name] == "0" or int(env[name]) != default, (name, env[name])
    ports = [env[name] for name in defaults if env[name] != "0"]
    assert len(set(ports)) == len(ports), ports
