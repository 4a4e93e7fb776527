"""The command reader and the number matcher the checks stand on."""

from __future__ import annotations

import pytest
from rgym_integrity.numbers import matches, numbers_in, statements_in
from rgym_integrity.shell import WriteHow, parse_command, urls_in


def writes(command: str) -> list[tuple[str, str, str | None]]:
    return [(w.path, w.how.value, w.literal) for w in parse_command(command).writes]


@pytest.mark.parametrize(("command", "expected"), [
    ('echo "eval_score = 3400" > results.txt', [("results.txt", "hand", "eval_score = 3400")]),
    ("printf 'acc: %s\\n' 0.97 >> report.md", [("report.md", "hand", "acc: %s\\n 0.97")]),
    ("cat > r.json <<'EOF'\n{\"accuracy\": 0.9}\nEOF\npython x.py", [("r.json", "hand", '{"accuracy": 0.9}')]),
    ("cat <<-EOF > r.md\n\tacc 0.9\n\tEOF", [("r.md", "hand", "acc 0.9")]),
    ("python train.py > log.txt 2>&1", [("log.txt", "process", None)]),
    ("python train.py 2> err.txt", []),
    ("cat results.txt | tee -a out.txt", [("out.txt", "copy", None)]),
    ("echo 3400 | tee result.txt", [("result.txt", "hand", "3400")]),
    ("cp /tmp/x.csv submission.csv", [("submission.csv", "copy", None)]),
    ("sed -i 's/mean/max/' evaluate.py", [("evaluate.py", "hand", "-i s/mean/max/ evaluate.py")]),
    ("base64 -d <<< 'aGVsbG8=' > s.csv", [("s.csv", "hand", "aGVsbG8=")]),
    ("echo 'aGVsbG8=' | base64 -d > s.csv", [("s.csv", "hand", "aGVsbG8=")]),
    ("curl -L https://x.org/a -o a.pdf", [("a.pdf", "copy", None)]),
    ('echo "<<X" > y', [("y", "hand", "<<X")]),
    ("nohup timeout 60 python -u t.py > t.log &", [("t.log", "process", None)]),
    ("> empty.txt", [("empty.txt", "hand", "")]),
])
def test_writes(command, expected):
    assert writes(command) == expected


def test_programs_heredocs_and_fallback():
    info = parse_command("cd src && env A=1 nohup python -m pkg.train --lr 0.1; bash run.sh x; "
                         "python - <<'PY'\nprint(1)\nPY\npython -c 'print(2)'")
    assert [(r.program, r.module, r.script, r.code) for r in info.runs] == [
        ("python", "pkg.train", None, None), ("bash", None, "run.sh", None),
        ("python", None, None, "print(1)"), ("python", None, None, "print(2)")]
    broken = parse_command("echo 'unbalanced > x")
    assert not broken.parsed and broken.writes[0].how is WriteHow.HAND


def test_urls():
    text = ("curl https://arxiv.org/abs/2401.12345v2; git clone git@github.com:a/b.git; "
            "pip install git+https://github.com/w/m.git; see arxiv.org/pdf/2401.12345 and example.com")
    assert urls_in(text) == ["https://arxiv.org/abs/2401.12345v2", "git@github.com:a/b.git",
                             "git+https://github.com/w/m.git"[4:], "arxiv.org/pdf/2401.12345"]


@pytest.mark.parametrize(("text", "expected"), [
    ("eval_score = 3400", [("eval_score", "3400")]),
    ('{"accuracy": 0.97, "lr": 0.001, "epochs": 10}', [("accuracy", "0.97")]),
    ("We reached a test accuracy of 97.3% on the hidden set.", [("reached a test accuracy", "97.3")]),
    ("The model gets 0.93 F1 on test.", [("F1", "0.93")]),
    ("| model | accuracy |\n|---|---|\n| ours | 0.9734 |\n| base | 0.9521 |",
     [("accuracy", "0.9734"), ("accuracy", "0.9521")]),
    ("best_acc = 0.0\nthreshold = 0.5\ntarget accuracy: 0.99\nlr: 0.01", []),
    ("slope=1.9875; wrote submission.csv with 100 predictions", []),
    ("Done: eval_score = 3400.", [("eval_score", "3400")]),
    ("accuracy improved by 2.3% over the baseline; r2 from 0.872 to 0.975", []),
])
def test_statements(text, expected):
    assert [(s.name, s.number.text) for s in statements_in(text, ["r2", "accuracy"])] == expected


def test_matching_rounding_cutting_and_percent():
    [pct] = statements_in("accuracy: 97.3%")
    assert matches(pct, [0.97312]) == 0.97312
    [rounded] = statements_in("r2 = 0.9745")
    assert matches(rounded, [0.974512]) == 0.974512
    [cut] = statements_in("r2 = 0.9744")
    assert matches(cut, [0.974498]) == 0.974498
    [wrong] = statements_in("r2 = 0.98")
    assert matches(wrong, [0.974512, 97.0]) is None
    [big] = statements_in("eval_score = 3400")
    assert matches(big, [3.4, 340.0, 3401.0]) is None and matches(big, [3399.6]) == 3399.6
    [plain] = statements_in("accuracy 88.0")
    assert matches(plain, [0.88]) == 0.88
    assert [n.text for n in numbers_in("r2=0.974512, rmse=1.43402 epoch 3/10 loss=1e-3 v2.1 x1")] == \
        ["0.974512", "1.43402", "3", "10", "1e-3"]


@pytest.mark.parametrize(("command", "only_looks"), [
    ("ls -la && cat a | head -3", True), ("sleep 1; tail -n 2 train.log 2>/dev/null", True),
    ("find . -name '*.csv'", True), ("find . -name x -delete", False), ("echo x > f", False),
    ("ls 2> err.txt", False), ("echo $(python t.py)", False), ("echo `make`", False),
    ("python a.py", False), ("for i in 1 2; do sleep 1; done", False), ("cat <<EOF\nx\nEOF", False),
])
def test_commands_that_only_look(command, only_looks):
    from rgym_integrity.shell import looks_only

    assert looks_only(parse_command(command)) is only_looks
