"""The command lines' refusals: a clear line and exit status 2, nothing started."""

from __future__ import annotations

import logging

import pytest

from gemini.k8s import agent, webhook


@pytest.fixture(autouse=True)
def _logging_as_it_was():
    """main() points the root logger at this test's captured stderr; later tests would log into
    that closed stream ("--- Logging error ---" in CI)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_agent_refuses_bad_settings(capsys, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert agent.main(["--memory-unit-mib", "0", "--api-server", "http://x"]) == 2
    assert "--memory-unit-mib must be at least 1" in capsys.readouterr().err
    assert agent.main([]) == 2
    assert "not in a pod (KUBERNETES_SERVICE_HOST unset): give --api-server" in \
        capsys.readouterr().err


def test_webhook_refuses_bad_settings_and_files(capsys, tmp_path):
    assert webhook.main(["serve", "--cert", "c", "--key", "k", "--memory-unit-mib", "0"]) == 2
    assert "must be positive" in capsys.readouterr().err
    missing = tmp_path / "none.pem"
    assert webhook.main(["serve", "--cert", str(missing), "--key", str(missing),
                         "--port", "0"]) == 1
    assert "cannot serve on 0.0.0.0:0" in capsys.readouterr().err


def test_webhook_certs_prints_the_ca_bundle(capsys, tmp_path):
    assert webhook.main(["certs", "--out", str(tmp_path), "--name", "10.0.0.1"]) == 0
    assert "caBundle: " in capsys.readouterr().out
    from cryptography import x509

    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "gemini-webhook.gemini-system.svc" in names.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["10.0.0.1"]


def test_the_agents_schedulers_hand_over_as_it_is_told():
    """(The default changed to hand-overs at the grant's arrival; the agent had no way back.)"""
    from gemini.core.launch import plan_scheduler

    def scheduler_argv(*flags: str) -> tuple[str, ...]:
        ns = agent.build_parser().parse_args(["--api-server", "http://x", *flags])
        return plan_scheduler(agent.settings_from(ns).backend).argv

    assert "--no-hand-over-at-arrival" not in scheduler_argv()
    assert "--no-hand-over-at-arrival" in scheduler_argv("--no-hand-over-at-arrival")
    # (and shares by work, on by default since 2026-12-06: the agent had no way back either)
    assert "--no-shared-speed" not in scheduler_argv()
    assert "--no-shared-speed" in scheduler_argv("--no-shared-speed")
    # (and lone and shared turns, on by default since 2026-12-07: nor for these)
    assert not {"--no-lone-turns", "--no-shared-turns"} & set(scheduler_argv())
    assert "--no-shared-turns" in scheduler_argv("--no-shared-turns")
    assert "--no-lone-turns" in scheduler_argv("--no-lone-turns")
    with pytest.raises(ValueError, match="--shared-turns needs lone turns"):
        scheduler_argv("--no-lone-turns", "--shared-turns")
