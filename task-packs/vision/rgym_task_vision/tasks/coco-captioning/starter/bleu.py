"""BLEU as the grader of mlgym/coco-captioning computes it (standard library only).

    from bleu import corpus_bleu, tokenize
    corpus_bleu([hypothesis_tokens, ...], [[reference_tokens, ...], ...])

* `tokenize(text)`: lower-cased word tokens; punctuation is dropped (as COCO's
  caption evaluation does).
* `corpus_bleu(...)`: BLEU-n over the whole test set (Papineni et al. 2002):
  n-gram counts clipped by the most in any one reference, geometric mean of the
  1..n-gram precisions with uniform weights, brevity penalty from the summed
  reference lengths closest to each hypothesis (the shorter on a tie); no
  smoothing. `bleu4` is the task's primary metric.
* `char_bleu(...)`: MLGym's own number for comparison: the mean over images of
  sentence-level BLEU-4 computed on *characters* (MLGym passed strings to NLTK's
  `sentence_bleu`), here against all references of an image.
"""

import math
import re
from collections import Counter

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")


def tokenize(text):
    """Lower-cased word tokens of `text` (letters and digits; "don't" stays one token)."""
    return _WORD.findall(str(text).lower())


def _ngrams(tokens, n):
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def _closest_length(hyp_len, ref_lens):
    return min(ref_lens, key=lambda r: (abs(r - hyp_len), r))


def _stats(hypothesis, references, max_n):
    """Clipped matches and totals per order, hypothesis and closest reference length."""
    matches, totals = [0] * max_n, [0] * max_n
    for n in range(1, max_n + 1):
        counts = _ngrams(hypothesis, n)
        best = Counter()
        for ref in references:
            for gram, c in _ngrams(ref, n).items():
                if c > best[gram]:
                    best[gram] = c
        matches[n - 1] = sum(min(c, best[g]) for g, c in counts.items())
        totals[n - 1] = max(0, len(hypothesis) - n + 1)
    return matches, totals, len(hypothesis), _closest_length(len(hypothesis), [len(r) for r in references])


def _combine(matches, totals, hyp_len, ref_len):
    if hyp_len == 0 or any(m == 0 for m in matches):
        return 0.0
    log_precision = sum(math.log(m / t) for m, t in zip(matches, totals)) / len(matches)
    brevity = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return brevity * math.exp(log_precision)


def corpus_bleu(hypotheses, references, max_n=4):
    """Corpus BLEU-`max_n` of token lists `hypotheses` against lists of reference token lists."""
    if len(hypotheses) != len(references):
        raise ValueError("one list of references per hypothesis")
    matches, totals, hyp_len, ref_len = [0] * max_n, [0] * max_n, 0, 0
    for hyp, refs in zip(hypotheses, references):
        m, t, h, r = _stats(list(hyp), [list(x) for x in refs], max_n)
        matches = [a + b for a, b in zip(matches, m)]
        totals = [a + b for a, b in zip(totals, t)]
        hyp_len += h
        ref_len += r
    return _combine(matches, totals, hyp_len, ref_len)


def sentence_bleu(hypothesis, references, max_n=4):
    """BLEU-`max_n` of one hypothesis (no smoothing: 0 when an order has no match)."""
    return _combine(*_stats(list(hypothesis), [list(r) for r in references], max_n))


def char_bleu(hypotheses, references):
    """Mean character-level sentence BLEU-4 (MLGym's computation, all references).

    Captions are normalised to their space-joined word tokens first."""
    scores = [sentence_bleu(" ".join(hyp), [" ".join(r) for r in refs])
              for hyp, refs in zip(hypotheses, references)]
    return sum(scores) / len(scores) if scores else 0.0


def scores(hypotheses, references):
    """Every metric the grader reports, from token lists."""
    return {"bleu4": corpus_bleu(hypotheses, references, 4),
            "bleu1": corpus_bleu(hypotheses, references, 1),
            "char_bleu": char_bleu(hypotheses, references)}
