import subprocess

from perfsuite import env


def test_fingerprint_has_the_named_fields():
    fp = env.fingerprint()
    for key in ("torch", "cuda", "cpu_model", "logical_cores", "torch_threads", "python", "os", "host",
                "git_commit", "git_dirty"):
        assert key in fp
    assert fp["torch_threads"] >= 1 and fp["logical_cores"] >= 1


def test_git_commit_and_dirty_state(tmp_path):
    def git(*a):
        subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)

    assert env.collect_git(tmp_path) == {"git_commit": None, "git_dirty": None}
    git("init", "-q")
    (tmp_path / "f.txt").write_text("1")
    git("add", "f.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    clean = env.collect_git(tmp_path)
    assert len(clean["git_commit"]) == 40 and clean["git_dirty"] is False
    (tmp_path / "f.txt").write_text("2")
    assert env.collect_git(tmp_path)["git_dirty"] is True


def test_mismatches_ignore_commit_host_and_patch_release():
    a = {"torch": "2.14.1", "cpu_model": "X", "python": "3.11.7", "git_commit": "a", "host": "h1"}
    b = {**a, "python": "3.11.9", "git_commit": "b", "host": "h2"}
    assert env.mismatches(a, b) == []
    assert env.mismatches(a, {**b, "cpu_model": "Y"}) == ["cpu_model: 'X' vs 'Y'"]
