import subprocess

from perfsuite.measuring import fingerprint


def test_fingerprint_has_the_named_fields():
    fp = fingerprint.fingerprint()
    for key in (
        "torch",
        "cuda",
        "cpu_model",
        "logical_cores",
        "torch_threads",
        "python",
        "os",
        "host",
        "git_commit",
        "git_dirty",
    ):
        assert key in fp
    assert fp["torch_threads"] >= 1 and fp["logical_cores"] >= 1


def test_git_commit_and_dirty_state(tmp_path):
    def git(*a):
        subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)

    assert fingerprint.collect_git(tmp_path) == {"git_commit": None, "git_dirty": None}
    git("init", "-q")
    (tmp_path / "f.txt").write_text("1")
    git("add", "f.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    clean = fingerprint.collect_git(tmp_path)
    assert len(clean["git_commit"]) == 40 and clean["git_dirty"] is False
    (tmp_path / "f.txt").write_text("2")
    assert fingerprint.collect_git(tmp_path)["git_dirty"] is True


def test_mismatches_ignore_commit_host_and_patch_release():
    a = {"torch": "2.14.1", "cpu_model": "X", "python": "3.11.7", "git_commit": "a", "host": "h1"}
    b = {**a, "python": "3.11.9", "git_commit": "b", "host": "h2"}
    assert fingerprint.mismatches(a, b) == []
    assert fingerprint.mismatches(a, {**b, "cpu_model": "Y"}) == ["cpu_model: 'X' vs 'Y'"]


def test_fingerprint_holds_what_can_disturb_a_measurement():
    fp = fingerprint.fingerprint()
    for key in (
        "cpu_governors",
        "cpu_turbo",
        "load_avg",
        "thread_env",
        "cpu_affinity",
        "steal_fraction",
        "others_cpus",
        "busy_processes",
    ):
        assert key in fp
    assert set(fp["cpu_affinity"]) <= set(range(fp["logical_cores"])) and 0 <= fp["steal_fraction"] <= 1


def test_thread_variables_are_collected(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    assert fingerprint.collect_threads()["thread_env"] == {"OMP_NUM_THREADS": "3"}
