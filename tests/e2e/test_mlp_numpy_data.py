"""examples/mlp_numpy/train.py on MNIST idx files (--mnist-dir) and by epochs (--epochs): a
small learnable data set written in the idx format, trained under sonde, where the step count
follows from the epochs; malformed files stop it with one line and exit status 2."""
import os
import subprocess

from conftest import clean_env, query, routine_calls

PYTHONPATH = os.path.join(os.environ.get("SONDE_BUILD", ""), "python")
MLP_NUMPY = os.path.join(os.environ.get("SONDE_SOURCE", ""), "examples", "mlp_numpy", "train.py")


def write_idx(directory, prefix, count, seed):
    """Images whose bright 78-pixel band is their label's: learnable in a few steps."""
    images, labels = bytearray(), bytearray()
    state = seed
    for _ in range(count):
        state = (state * 1103515245 + 12345) % 2**31
        label = state % 10
        pixels = bytearray(784)
        for p in range(label * 78, label * 78 + 78):
            pixels[p] = 200
        images += pixels
        labels.append(label)
    header = lambda magic, *dims: b"".join(v.to_bytes(4, "big") for v in (magic, *dims))
    (directory / f"{prefix}-images-idx3-ubyte").write_bytes(
        header(0x803, count, 28, 28) + bytes(images))
    (directory / f"{prefix}-labels-idx1-ubyte").write_bytes(header(0x801, count) + bytes(labels))


def train(tmp_path, *args, db=None):
    cmd = ["/usr/bin/python3"]
    if db is not None:
        cmd += ["-m", "sonde", "-o", str(db)]
    return subprocess.run(cmd + [MLP_NUMPY, *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path,
                          env=clean_env(PYTHONPATH=PYTHONPATH, OPENBLAS_NUM_THREADS=1))


def test_trains_on_idx_files_for_the_epochs_asked(tmp_path):
    write_idx(tmp_path, "train", 300, 1)
    write_idx(tmp_path, "t10k", 100, 2)
    db = tmp_path / "prof.db"
    r = train(tmp_path, "--mnist-dir", tmp_path, "--epochs", 4, "--hidden", 64,
              "--eval-every", 3, db=db)
    assert r.returncode == 0, r.stderr
    # 4 epochs of 300 samples in batches of 100: 12 steps, a line every 3.
    assert [l.split()[1] for l in r.stdout.splitlines() if l.startswith("step ")] == [
        "3", "6", "9", "12"]
    final = r.stdout.splitlines()[-1].split()
    assert final[0:2] == ["final", "loss"] and float(final[4]) >= 0.9  # the bands are learnt
    # 12 steps x 6 parameters updated; the test set's single batch adds forward products only.
    assert query(db, "SELECT SUM(n.calls) FROM nodes n JOIN routines r USING (routine_id) "
                     "WHERE r.name LIKE '%(update_core_cpu)'") == [(72,)]
    assert routine_calls(db, "cblas_sgemm") == 12 * 8 + 1 * 3


def test_malformed_idx_files_stop_with_one_line(tmp_path):
    write_idx(tmp_path, "train", 10, 1)
    write_idx(tmp_path, "t10k", 10, 2)
    labels = tmp_path / "t10k-labels-idx1-ubyte"
    labels.write_bytes(labels.read_bytes()[:-1])  # one label short of the header's count
    r = train(tmp_path, "--mnist-dir", tmp_path, "--steps", 1)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"train.py: {labels}: size does not match header count 10"]
    r = train(tmp_path, "--mnist-dir", tmp_path / "missing", "--steps", 1)
    assert r.returncode == 2 and "cannot open" in r.stderr
