"""doctor.check: environment dicts and training settings -> findings (what, why, fix)."""

from __future__ import annotations

import pytest

from nccl_workbook.doctor import DEPRECATED_ALIASES, Severity, TrainingSettings, check, render_text


def checks(env=None, settings=None) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in check(env={} if env is None else env, settings=settings):
        out.setdefault(f.check, []).append(f)
    return out


def test_clean_environment_and_no_settings_is_silent():
    assert check(env={}) == []
    assert render_text([]) == "nccl-workbook doctor: nothing to report.\n"


def test_nccl_timeout_is_read_by_nobody():
    (f,) = check(env={"NCCL_TIMEOUT": "3600"})
    assert (f.check, f.severity, f.subject) == ("nccl-timeout-unread", Severity.ERROR, "NCCL_TIMEOUT")
    assert "nothing reads it" in f.what and "init_process_group" in f.fix and "timeout=" in f.fix


def test_a_scripts_own_timeout_variable_only_works_if_the_script_reads_it():
    (f,) = check(env={"NCCL_TIMEOUT_MINUTES": "30"})
    assert (f.check, f.severity) == ("nccl-timeout-script-variable", Severity.INFO)
    assert "your script reads it" in f.why


@pytest.mark.parametrize("old", ["NCCL_ASYNC_ERROR_HANDLING", "NCCL_BLOCKING_WAIT", "NCCL_DESYNC_DEBUG"])
def test_deprecated_aliases_still_work_but_warn(old):
    (f,) = [f for f in check(env={old: "1"}) if f.check == "deprecated-alias"]
    new = "TORCH_" + old
    assert DEPRECATED_ALIASES[old] == new
    assert (f.check, f.severity, f.subject) == ("deprecated-alias", Severity.WARNING, old)
    assert f"Environment variable {old} is deprecated; use {new} instead" in f.why
    assert f.fix == f"Rename it to {new}."


def test_both_names_set_the_new_one_wins():
    (f,) = check(env={"NCCL_BLOCKING_WAIT": "1", "TORCH_NCCL_BLOCKING_WAIT": "0"})
    assert "which wins" in f.what and "drop the old one" in f.fix


def test_seed_000_environment():
    """The MU-Diff incident: setdefault of the old names plus NCCL_DEBUG; the timeout was in code."""
    found = checks({"NCCL_ASYNC_ERROR_HANDLING": "1", "NCCL_BLOCKING_WAIT": "1", "NCCL_DEBUG": "WARN",
                    "NCCL_TIMEOUT_MINUTES": "30"},
                   TrainingSettings(pg_timeout_s=1800, dataloader_timeout_s=600, workers_per_rank=8,
                                    ranks_per_host=2, open_file_limit=1024))
    assert [f.subject for f in found["deprecated-alias"]] == ["NCCL_ASYNC_ERROR_HANDLING", "NCCL_BLOCKING_WAIT"]
    assert "nccl-timeout-script-variable" in found
    assert "dataloader-timeout-not-below-pg" not in found  # 600 s < 1800 s is fine
    assert "open-files-tight" not in found  # ~384 descriptors against 1024 (the seed's real limit is unknown)


def test_seed_001_and_003_environment():
    found = checks({"NCCL_TIMEOUT": "300", "NCCL_BLOCKING_WAIT": "1", "NCCL_IB_DISABLE": "1",
                    "NCCL_P2P_DISABLE": "1", "TORCH_NCCL_TRACE_BUFFER_SIZE": "1000"})
    assert found["nccl-timeout-unread"][0].severity is Severity.ERROR
    assert sorted(f.subject for f in found["transport-disabled"]) == ["NCCL_IB_DISABLE", "NCCL_P2P_DISABLE"]
    assert all("slower" in f.why for f in found["transport-disabled"])
    assert {f.subject for f in found["deprecated-alias"]} == {"NCCL_BLOCKING_WAIT", "TORCH_NCCL_TRACE_BUFFER_SIZE"}
    assert "NCCL_IB_DISABLE=0" not in str(checks({"NCCL_IB_DISABLE": "0"}))  # 0 leaves IB on: nothing to say
    assert checks({"NCCL_IB_DISABLE": "0"}) == {}


def test_findings_are_ordered_by_severity():
    findings = check(env={"NCCL_P2P_DISABLE": "1", "NCCL_TIMEOUT": "5", "TORCH_DISTRIBUTED_DEBUG": "DETAIL"})
    assert [f.severity for f in findings] == [Severity.ERROR, Severity.WARNING, Severity.INFO]
    text = render_text(findings)
    assert text.startswith("nccl-workbook doctor: 3 finding(s)") and "    why: " in text and "    fix: " in text


def test_error_handling_and_monitoring_switched_off():
    found = checks({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0", "TORCH_NCCL_ENABLE_MONITORING": "0",
                    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "10"})
    assert found["async-error-handling-off"][0].severity is Severity.ERROR
    assert "heartbeat-monitor-off" in found and "heartbeat-timeout-short" in found
    assert checks({"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "600"}) == {}


def test_blocking_wait_is_named_for_what_it_does_on_nccl():
    found = checks({"TORCH_NCCL_BLOCKING_WAIT": "1"})
    f = found["blocking-wait"][0]
    assert f.severity is Severity.WARNING and "synchronous" in f.why and "Unset" in f.fix
    assert found.keys() == {"blocking-wait"}
    assert checks({"NCCL_BLOCKING_WAIT": "true"})["blocking-wait"][0].subject == "NCCL_BLOCKING_WAIT"
    assert "blocking-wait" not in checks({"TORCH_NCCL_BLOCKING_WAIT": "0"})
    assert "blocking-wait" not in checks({"TORCH_NCCL_BLOCKING_WAIT": "0", "NCCL_BLOCKING_WAIT": "1"})


def test_flight_recorder_off_and_dump_location_while_debugging():
    assert checks({"TORCH_FR_BUFFER_SIZE": "0"})["flight-recorder-off"][0].severity is Severity.WARNING
    debugging = checks({"NCCL_DEBUG": "INFO", "TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, TrainingSettings(debugging=True))
    assert set(debugging) == {"flight-recorder-dump-location"}
    assert "TORCH_FR_DUMP_TEMP_FILE" in debugging["flight-recorder-dump-location"][0].fix


def test_nccl_debug_unset_only_matters_while_debugging():
    assert "nccl-debug-unset" not in checks({})
    found = checks({}, TrainingSettings(debugging=True))
    assert found["nccl-debug-unset"][0].fix.startswith("Set NCCL_DEBUG=INFO")
    assert "distributed-debug-off" in found


def test_dataloader_timeout_not_below_process_group_timeout():
    (f,) = check(env={}, settings=TrainingSettings(pg_timeout_s=600, dataloader_timeout_s=600))
    assert (f.check, f.severity) == ("dataloader-timeout-not-below-pg", Severity.ERROR)
    assert "e.g. 300 s" in f.fix
    assert check(env={}, settings=TrainingSettings(pg_timeout_s=600, dataloader_timeout_s=120)) == []
    (off,) = check(env={}, settings=TrainingSettings(pg_timeout_s=600, dataloader_timeout_s=0))
    assert off.check == "dataloader-timeout-off"


def test_process_group_timeout_extremes():
    assert checks({}, TrainingSettings(pg_timeout_s=3 * 3600))["pg-timeout-long"][0].severity is Severity.INFO
    assert checks({}, TrainingSettings(pg_timeout_s=5))["pg-timeout-short"][0].severity is Severity.WARNING


def test_workers_against_the_open_file_limit():
    tight = checks({}, TrainingSettings(workers_per_rank=16, ranks_per_host=8, open_file_limit=256))
    (f,) = tight["open-files-tight"]
    assert f.severity is Severity.ERROR and "the limit is 256" in f.what and "8 ranks per host" in f.what
    assert "ulimit -n" in f.fix
    roomy = checks({}, TrainingSettings(workers_per_rank=4, ranks_per_host=8, open_file_limit=65536))
    assert "open-files-tight" not in roomy
    warn = checks({}, TrainingSettings(workers_per_rank=8, open_file_limit=640))
    assert warn["open-files-tight"][0].severity is Severity.WARNING


def test_settings_validation_and_from_process():
    with pytest.raises(ValueError, match="pg_timeout_s must be >= 0 seconds, got -1"):
        TrainingSettings(pg_timeout_s=-1)
    detected = TrainingSettings.from_process(workers_per_rank=2)
    assert detected.workers_per_rank == 2
    assert detected.open_file_limit is None or detected.open_file_limit > 0


def test_findings_serialise():
    (f,) = check(env={"CUDA_LAUNCH_BLOCKING": "1"})
    assert f.to_json() == {"check": "cuda-launch-blocking", "severity": "warning", "what": f.what, "why": f.why,
                           "fix": f.fix, "subject": "CUDA_LAUNCH_BLOCKING"}


def test_noop_settings_table_for_other_modules():
    from nccl_workbook.doctor import NOOP_SETTINGS, noop_setting

    assert "NCCL_TIMEOUT" in NOOP_SETTINGS and "torch.distributed.distributed_c10d._DEFAULT_PG_TIMEOUT" in NOOP_SETTINGS
    assert all(isinstance(why, str) and "timeout=" in why for why in NOOP_SETTINGS.values())
    assert noop_setting("c10d._DEFAULT_PG_TIMEOUT") == NOOP_SETTINGS["torch.distributed.distributed_c10d._DEFAULT_PG_TIMEOUT"]
    assert noop_setting("torch.distributed.constants.default_pg_timeout") is not None
    # distributed_c10d reads its own default_pg_timeout at call time: assigning that one works
    assert noop_setting("distributed_c10d.default_pg_timeout") is None
    assert noop_setting("NCCL_DEBUG") is None


def test_noop_settings_verified_on_this_torch():
    """What the table says about attributes holds on the installed torch."""
    from datetime import timedelta

    torch_dist = pytest.importorskip("torch.distributed")
    import torch.distributed.constants as constants
    import torch.distributed.distributed_c10d as c10d

    assert not hasattr(c10d, "_DEFAULT_PG_TIMEOUT")
    before = c10d._get_default_timeout(torch_dist.Backend.GLOO)
    saved = constants.default_pg_timeout
    try:
        constants.default_pg_timeout = timedelta(seconds=1)
        assert c10d._get_default_timeout(torch_dist.Backend.GLOO) == before
    finally:
        constants.default_pg_timeout = saved


def test_every_check_is_a_small_function_in_the_table():
    from nccl_workbook.doctor import CHECKS

    names = {f.check for f in check(env={"NCCL_TIMEOUT": "1", "NCCL_IB_DISABLE": "1", "CUDA_LAUNCH_BLOCKING": "1"},
                                    settings=TrainingSettings(pg_timeout_s=5, dataloader_timeout_s=0, debugging=True))}
    assert {"nccl-timeout-unread", "transport-disabled", "cuda-launch-blocking", "pg-timeout-short",
            "dataloader-timeout-off", "nccl-debug-unset"} <= names
    assert len(CHECKS) == len(set(CHECKS))
