"""feedstock/after_build/image/pip_access.py, log_lines and network: what the pip steps are given,
the line a failed build is summed up by, the reachability check before the slow part."""
from __future__ import annotations

import pytest

from feedstock.after_build.image.envfile import Line
from feedstock.after_build.image.network import reachable
from feedstock.after_build.image.pip_access import CERT_MOUNT, pip_access
from feedstock.after_build.log_lines import first_error_line
from feedstock.errors import FeedstockError

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_the_bundle_is_mounted_and_names_are_passed_without_values(tmp_path):
    cert = tmp_path / "site-ca.pem"
    cert.write_text(PEM)
    access = pip_access(cert, {"PIP_INDEX_URL": "https://user:secret@pypi.example.org/simple",
                               "PIP_TARGET": "/elsewhere", "PIP_CERT": "/ignored.pem"})
    args = access.podman_args()
    assert args == ["-e", "PIP_INDEX_URL", "-v", f"{cert}:{CERT_MOUNT}:ro", "-e", f"PIP_CERT={CERT_MOUNT}"]
    assert not any("secret" in arg for arg in args)   # podman reads the value from its environment


def test_pip_cert_from_the_environment(tmp_path):
    cert = tmp_path / "ca.pem"
    cert.write_text(PEM)
    assert pip_access(None, {"PIP_CERT": str(cert)}).cert == cert
    assert pip_access(None, {}).podman_args() == []


@pytest.mark.parametrize("content, says", [(None, "no such file"), ("not a cert\n", "not a PEM certificate bundle")])
def test_a_bad_bundle_is_one_line(tmp_path, content, says):
    cert = tmp_path / "ca.pem"
    if content is not None:
        cert.write_text(content)
    with pytest.raises(FeedstockError, match=f"^--pip-cert {cert}: {says}"):
        pip_access(cert, {})


def test_the_compilers_line_comes_before_pips_summary():
    output = ("  error: subprocess-exited-with-error\n  Building wheel for broken (setup.py) ... error\n"
              "      broken.cpp:3:1: error: 'nonsense' does not name a type\n      broken.cpp:9:2: error: second\n")
    assert first_error_line(output) == "broken.cpp:3:1: error: 'nonsense' does not name a type"
    assert first_error_line("ERROR: Could not find a version that satisfies x\n").startswith("ERROR: Could not")
    assert first_error_line("all fine\n") is None


def test_an_unresolvable_vcs_host_is_refused_before_anything_runs(monkeypatch):
    for name in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "PIP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    line = Line("env.yml:9", "scatter @ git+https://git.example.invalid/scatter.git@2.1.2")
    with pytest.raises(FeedstockError) as err:
        reachable(line)
    assert err.value.exit_code == 3
    assert str(err.value).startswith("env.yml:9: 'scatter @ git+https://git.example.invalid/scatter.git@2.1.2' "
                                     "needs git.example.invalid:443, which this machine cannot reach (does not resolve)")
