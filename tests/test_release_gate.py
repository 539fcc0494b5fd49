"""`claims verify --check`, the release gate: a fresh run must reproduce the committed reports but for timings."""

from __future__ import annotations

import json

from test_loading import claim, claim_file, claims_dir

from harness.cli import main as claims_main


def _verify(*extra: str) -> int:
    return claims_main(["verify", "--profile", "smoke", "--no-cache", *extra])


def test_check_passes_on_a_current_report_and_fails_on_a_stale_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    claims = claims_dir(tmp_path, {"a.yaml": claim_file(claim("bernoulli-gradient"))})

    assert _verify() == 0
    results = json.loads((tmp_path / "reports" / "claims.json").read_text(encoding="utf-8"))
    assert [row["status"] for row in results["claims"]] == ["passed"]
    assert "## Registry of claims" in (tmp_path / "Module_4_Sources.md").read_text(encoding="utf-8")
    assert _verify("--check") == 0, capsys.readouterr().err

    # The claim changes but the committed report does not: the gate must say so, and by name.
    (claims / "a.yaml").write_text(claim_file(claim("bernoulli-gradient", extra="    limitations: new.\n")),
                                   encoding="utf-8")
    capsys.readouterr()
    assert _verify("--check") == 1
    err = capsys.readouterr().err
    assert "claim 'bernoulli-gradient' changed" in err
    assert "the committed reports are stale" in err
