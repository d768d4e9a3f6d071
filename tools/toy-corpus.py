#!/usr/bin/env python3
"""Generates parla's synthetic parallel corpus: a toy language pair that needs attention to translate.

The quickstart trains on this corpus so that a fresh machine shows real learning in minutes, with no third-party
text. Both languages are our own:

  source `xx` (invented words, SOV):   noun classes I/II/III mark the article, the plural suffix of the noun, the
      agreement suffix of every adjective and the suffix of the main verb (which agrees with the subject's class,
      not its number); case particles `ne` (subject) and `ak` (object) allow OSV scrambling; adjectives follow the
      noun in mirror order; a count is written in digits after the noun; relative clauses come before the noun
      they modify; a time/manner adverb opens the sentence; negation is the particle `ma` before the verb.
  target `yy` (simple English words, SVO):  fixed subject-verb-object order; adjectives before the noun; counts
      spelled out (37 -> "thirty seven"); the verb agrees with the subject's NUMBER ("sees" / "see",
      "does not" / "do not"), which in the source is marked only on the subject noun, possibly far away; "a"/"an"
      agree with the next word; relative clauses follow the noun ("the dog that sees a cat") and their verb agrees
      with the head noun; the adverb closes the sentence.

So a model must reorder (SOV/OSV -> SVO, mirrored adjectives, pre- -> post-nominal relatives), carry agreement
across the sentence, and spell out numbers: the three things Bahdanau et al. (2015) and Vaswani et al. (2017)
show attention is for. The target is a deterministic function of the source (every source token has a unique
analysis and case particles fix the roles), so BLEU 100 is reachable; `--check` verifies that empirically.

The lexicon is fixed (built from LEXICON_SEED, independent of --seed): --seed only changes which sentences are
drawn. Held-out sentences (test, valid) are drawn first and never occur in train.

  python3 tools/toy-corpus.py --out-dir out/toy --train 20000 --valid 500 --test 500 --seed 1
  -> out/toy/{train,valid,test}.{xx,yy}  (one sentence per line, words separated by spaces, UTF-8)
"""
import argparse
import os
import random
import sys

LEXICON_SEED = 7
MIN_TOKENS = 4
MAX_TOKENS = 20

# Target-side words. Nouns take a regular English plural (see plural()).
NOUNS = """
dog cat bird horse cow sheep_ goat pig duck fox wolf bear lion tiger mouse_ rabbit frog fish_ snake owl eagle ant
bee horse_ man_ woman_ child_ boy girl king queen farmer teacher doctor baker singer painter sailor soldier student
friend neighbour stranger apple egg orange banana cake bread cheese letter book song story picture map key box bag
cup bottle basket hat coat shoe ball ring stone flower tree river mountain island garden house door window table
chair bed boat car train bicycle wagon lamp clock bell drum flag coin candle rope ladder bucket hammer mirror
""".split()
ADJECTIVES = """
big small old young red blue green black white happy sad angry tired hungry quiet loud fast slow tall short heavy
light warm cold clever brave lazy kind rich poor empty full new strange famous gentle proud wild yellow round
""".split()
# (base, third person singular, past)
TRANSITIVE = [
    ("see", "sees", "saw"), ("find", "finds", "found"), ("take", "takes", "took"), ("bring", "brings", "brought"),
    ("carry", "carries", "carried"), ("follow", "follows", "followed"), ("help", "helps", "helped"),
    ("watch", "watches", "watched"), ("call", "calls", "called"), ("like", "likes", "liked"),
    ("love", "loves", "loved"), ("hate", "hates", "hated"), ("paint", "paints", "painted"),
    ("push", "pushes", "pushed"), ("pull", "pulls", "pulled"), ("open", "opens", "opened"),
    ("close", "closes", "closed"), ("buy", "buys", "bought"), ("sell", "sells", "sold"),
    ("hide", "hides", "hid"), ("chase", "chases", "chased"), ("catch", "catches", "caught"),
    ("throw", "throws", "threw"), ("wash", "washes", "washed"), ("build", "builds", "built"),
    ("break", "breaks", "broke"), ("visit", "visits", "visited"), ("greet", "greets", "greeted"),
    ("remember", "remembers", "remembered"), ("forget", "forgets", "forgot"), ("draw", "draws", "drew"),
    ("feed", "feeds", "fed"), ("hold", "holds", "held"), ("keep", "keeps", "kept"), ("lose", "loses", "lost"),
    ("meet", "meets", "met"), ("teach", "teaches", "taught"), ("touch", "touches", "touched"),
    ("want", "wants", "wanted"), ("move", "moves", "moved"),
]
INTRANSITIVE = [
    ("sleep", "sleeps", "slept"), ("run", "runs", "ran"), ("sing", "sings", "sang"), ("dance", "dances", "danced"),
    ("laugh", "laughs", "laughed"), ("cry", "cries", "cried"), ("wait", "waits", "waited"),
    ("swim", "swims", "swam"), ("jump", "jumps", "jumped"), ("fall", "falls", "fell"), ("work", "works", "worked"),
    ("smile", "smiles", "smiled"), ("shout", "shouts", "shouted"), ("rest", "rests", "rested"),
    ("arrive", "arrives", "arrived"),
]
ADVERBS = ["today", "yesterday", "often", "never", "quickly", "slowly", "again", "here", "there", "at night",
           "in the morning", "together"]
ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]

# Source-side grammatical morphemes. Class I/II/III = 0/1/2.
SRC_ARTICLE = {(True, 0): "le", (True, 1): "mo", (True, 2): "ti",  # (definite, class)
               (False, 0): "un", (False, 1): "pa", (False, 2): "se"}
SRC_PLURAL = ["i", "en", "ul"]        # noun plural suffix by class
SRC_AGREE = ["a", "e", "o"]           # adjective and main-verb class agreement
SRC_ADJ_PLURAL = "n"                  # adjectives also agree in number
SRC_PAST = "ti"                       # verb tense suffix (present is unmarked)
SRC_REL = "ku"                        # relative-clause verb suffix (no agreement: the head comes later)
SRC_SUBJ, SRC_OBJ, SRC_NEG, SRC_STOP = "ne", "ak", "ma", "."


def spell_number(n):
    """2..99 in words: 37 -> "thirty seven"."""
    if n < 20:
        return ONES[n]
    return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])


def plural(noun):
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


class Lexicon:
    """The fixed invented source words, one per target word, with a noun class for every noun."""

    def __init__(self):
        rng = random.Random(LEXICON_SEED)
        # Nouns with irregular English plurals are marked with "_" above and left out (keeps the target regular).
        self.nouns = sorted(set(n for n in NOUNS if not n.endswith("_")))
        self.adjectives = ADJECTIVES
        self.transitive = TRANSITIVE
        self.intransitive = INTRANSITIVE
        self.adverbs = ADVERBS
        grammatical = set(SRC_ARTICLE.values()) | {SRC_SUBJ, SRC_OBJ, SRC_NEG, SRC_STOP}
        onsets = list("bdfgklmnprstvz") + ["sh", "tr", "kr"]
        vowels = list("aeiou")
        codas = ["", "", "", "r", "n", "l", "s", "k"]
        used = set(grammatical)

        def invent(syllables):
            while True:
                w = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(syllables - 1))
                w += rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas)
                if w not in used:
                    used.add(w)
                    return w

        self.src_noun = {n: invent(2) for n in self.nouns}
        self.noun_class = {n: rng.randrange(3) for n in self.nouns}
        self.src_adj = {a: invent(2) for a in self.adjectives}
        self.src_verb = {v[0]: invent(2) for v in self.transitive + self.intransitive}
        self.src_adverb = {a: invent(3) for a in self.adverbs}
        self._check_unique_analysis()

    def _check_unique_analysis(self):
        """Every source surface form must have one analysis, so the translation is a function of the source."""
        forms = {}

        def add(form, analysis):
            if forms.setdefault(form, analysis) != analysis:
                raise AssertionError(f"source form {form!r} is ambiguous: {forms[form]} / {analysis}")

        for k, v in SRC_ARTICLE.items():
            add(v, ("article",) + k)
        for w in (SRC_SUBJ, SRC_OBJ, SRC_NEG, SRC_STOP):
            add(w, ("particle", w))
        for n, s in self.src_noun.items():
            add(s, ("noun", n, "sg"))
            add(s + SRC_PLURAL[self.noun_class[n]], ("noun", n, "pl"))
        for a, s in self.src_adj.items():
            for c in range(3):
                for pl in (False, True):
                    add(s + SRC_AGREE[c] + (SRC_ADJ_PLURAL if pl else ""), ("adj", a, c, pl))
        for v, s in self.src_verb.items():
            for past in (False, True):
                stem = s + (SRC_PAST if past else "")
                add(stem + SRC_REL, ("relverb", v, past))
                for c in range(3):
                    add(stem + SRC_AGREE[c], ("verb", v, past, c))
        for a, s in self.src_adverb.items():
            add(s, ("adverb", a))


class Generator:
    """Draws meaning representations and realises them in both languages."""

    def __init__(self, lexicon, rng):
        self.lx = lexicon
        self.rng = rng

    # ---- meaning ----
    def noun_phrase(self, allow_relative, p_relative):
        r = self.rng
        np = {
            "noun": r.choice(self.lx.nouns),
            "definite": r.random() < 0.6,
            "plural": r.random() < 0.4,
            "count": None,
            "adjs": [],
            "rel": None,
        }
        if np["plural"] and r.random() < 0.4:
            np["count"] = r.randint(2, 99)
        n_adj = r.choices([0, 1, 2], weights=[50, 35, 15])[0]
        np["adjs"] = r.sample(self.lx.adjectives, n_adj)
        if allow_relative and r.random() < p_relative:
            if r.random() < 0.7:
                verb = r.choice(self.lx.transitive)
                obj = self.noun_phrase(False, 0.0)
                obj["adjs"] = obj["adjs"][:1]
            else:
                verb, obj = r.choice(self.lx.intransitive), None
            np["rel"] = {"verb": verb, "obj": obj, "past": r.random() < 0.5}
        return np

    def sentence(self):
        r = self.rng
        transitive = r.random() < 0.7
        s = {
            "subj": self.noun_phrase(True, 0.15),
            "verb": r.choice(self.lx.transitive if transitive else self.lx.intransitive),
            "obj": self.noun_phrase(True, 0.10) if transitive else None,
            "past": r.random() < 0.5,
            "neg": r.random() < 0.2,
            "adverb": r.choice(self.lx.adverbs) if r.random() < 0.3 else None,
            "osv": transitive and r.random() < 0.25,
        }
        return s

    # ---- source language (xx) ----
    def src_np(self, np, case):
        lx = self.lx
        cls = lx.noun_class[np["noun"]]
        out = []
        if np["rel"]:
            rel = np["rel"]
            if rel["obj"]:
                out += self.src_np(rel["obj"], SRC_OBJ)
            out.append(lx.src_verb[rel["verb"][0]] + (SRC_PAST if rel["past"] else "") + SRC_REL)
        out.append(SRC_ARTICLE[(np["definite"], cls)])
        out.append(lx.src_noun[np["noun"]] + (SRC_PLURAL[cls] if np["plural"] else ""))
        if np["count"] is not None:
            out.append(str(np["count"]))
        for a in reversed(np["adjs"]):  # mirror order of the target
            out.append(lx.src_adj[a] + SRC_AGREE[cls] + (SRC_ADJ_PLURAL if np["plural"] else ""))
        out.append(case)
        return out

    def source(self, s):
        lx = self.lx
        out = []
        if s["adverb"]:
            out.append(lx.src_adverb[s["adverb"]])
        subj = self.src_np(s["subj"], SRC_SUBJ)
        obj = self.src_np(s["obj"], SRC_OBJ) if s["obj"] else []
        out += (obj + subj) if s["osv"] else (subj + obj)
        if s["neg"]:
            out.append(SRC_NEG)
        cls = lx.noun_class[s["subj"]["noun"]]
        out.append(lx.src_verb[s["verb"][0]] + (SRC_PAST if s["past"] else "") + SRC_AGREE[cls])
        out.append(SRC_STOP)
        return out

    # ---- target language (yy) ----
    def tgt_np(self, np):
        words = []
        if np["count"] is not None:
            words += spell_number(np["count"]).split()
        words += np["adjs"]
        words.append(plural(np["noun"]) if np["plural"] else np["noun"])
        if np["definite"]:
            out = ["the"] + words
        elif not np["plural"]:
            out = ["an" if words[0][0] in "aeiou" else "a"] + words
        else:
            out = words
        if np["rel"]:
            rel = np["rel"]
            out.append("that")
            out += self.tgt_verb(rel["verb"], rel["past"], np["plural"], False)
            if rel["obj"]:
                out += self.tgt_np(rel["obj"])
        return out

    @staticmethod
    def tgt_verb(verb, past, plural_subject, neg):
        base, third, past_form = verb
        if neg:
            aux = "did" if past else ("do" if plural_subject else "does")
            return [aux, "not", base]
        if past:
            return [past_form]
        return [base if plural_subject else third]

    def target(self, s):
        out = self.tgt_np(s["subj"])
        out += self.tgt_verb(s["verb"], s["past"], s["subj"]["plural"], s["neg"])
        if s["obj"]:
            out += self.tgt_np(s["obj"])
        if s["adverb"]:
            out += s["adverb"].split()
        out.append(".")
        return out

    def pair(self):
        """One (source, target) pair of MIN_TOKENS..MAX_TOKENS tokens on each side."""
        while True:
            s = self.sentence()
            src, tgt = self.source(s), self.target(s)
            if MIN_TOKENS <= len(src) <= MAX_TOKENS and MIN_TOKENS <= len(tgt) <= MAX_TOKENS:
                return detokenize(src), detokenize(tgt)


def detokenize(tokens):
    """Written form: the full stop sticks to the last word ("the bird jumped.")."""
    return " ".join(tokens[:-1]) + tokens[-1] if tokens[-1] == SRC_STOP else " ".join(tokens)


def tokens_of(line):
    """The tokens of a written line (the inverse of detokenize), for length checks."""
    words = line.split()
    return words[:-1] + [words[-1][:-1], "."] if words and words[-1].endswith(".") and words[-1] != "." else words


def draw_unique(gen, n, seen, label):
    """n pairs whose source sentences are not in `seen` (and not repeated); adds them to `seen`."""
    pairs = []
    attempts = 0
    limit = 50 * n + 1000
    while len(pairs) < n:
        attempts += 1
        if attempts > limit:
            raise SystemExit(f"toy-corpus: could not draw {n} distinct {label} sentences")
        src, tgt = gen.pair()
        if src in seen:
            continue
        seen.add(src)
        pairs.append((src, tgt))
    return pairs


def write_atomic(path, lines):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line + "\n")
    os.replace(tmp, path)


def check(n, seed):
    """Verifies the properties the quickstart relies on, on n drawn sentences; returns a list of failures."""
    gen = Generator(Lexicon(), random.Random(seed))
    mapping, failures = {}, []
    src_vocab, tgt_vocab = set(), set()
    for _ in range(n):
        src, tgt = gen.pair()
        if mapping.setdefault(src, tgt) != tgt:
            failures.append(f"source {src!r} has two translations: {mapping[src]!r} / {tgt!r}")
        for side, vocab in ((src, src_vocab), (tgt, tgt_vocab)):
            toks = tokens_of(side)
            if not MIN_TOKENS <= len(toks) <= MAX_TOKENS:
                failures.append(f"length {len(toks)} out of range: {side!r}")
            vocab.update(toks)
    first, second = (Generator(Lexicon(), random.Random(seed)) for _ in range(2))
    if [first.pair() for _ in range(100)] != [second.pair() for _ in range(100)]:
        failures.append("the same seed gave different sentences")
    print(f"toy-corpus check: {n} sentences, {len(mapping)} distinct sources, source types {len(src_vocab)}, "
          f"target types {len(tgt_vocab)}, {len(failures)} failures", file=sys.stderr)
    return failures


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out-dir", "-o", help="output folder (created); writes {train,valid,test}.{SRC,TGT}")
    p.add_argument("--train", type=int, default=20000, help="training pairs")
    p.add_argument("--valid", type=int, default=500, help="held-out validation pairs")
    p.add_argument("--test", type=int, default=500, help="held-out test pairs")
    p.add_argument("--seed", type=int, default=1, help="which sentences are drawn (the languages never change)")
    p.add_argument("--src-lang", default="xx", help="file suffix of the source language")
    p.add_argument("--tgt-lang", default="yy", help="file suffix of the target language")
    p.add_argument("--check", type=int, metavar="N", default=0,
                   help="instead of writing files, verify on N sentences that the translation is a function of "
                        "the source, lengths are in range and the seed is reproducible (exit 1 on failure)")
    a = p.parse_args(argv)

    if a.check:
        failures = check(a.check, a.seed)
        for f in failures[:20]:
            print("toy-corpus: " + f, file=sys.stderr)
        return 1 if failures else 0
    if not a.out_dir:
        p.error("--out-dir is required (or use --check N)")
    for name in ("train", "valid", "test"):
        if getattr(a, name) < 0:
            p.error(f"--{name} must be >= 0")
    if a.src_lang == a.tgt_lang or not a.src_lang or not a.tgt_lang:
        p.error("--src-lang and --tgt-lang must be two different non-empty suffixes")

    gen = Generator(Lexicon(), random.Random(a.seed))
    seen = set()
    # Held-out sets first, so that train never contains a test or validation source sentence.
    splits = {}
    for name in ("test", "valid", "train"):
        splits[name] = draw_unique(gen, getattr(a, name), seen, name)
    os.makedirs(a.out_dir, exist_ok=True)
    for name, pairs in splits.items():
        write_atomic(os.path.join(a.out_dir, f"{name}.{a.src_lang}"), [s for s, _ in pairs])
        write_atomic(os.path.join(a.out_dir, f"{name}.{a.tgt_lang}"), [t for _, t in pairs])
    print(f"toy-corpus: wrote {a.train} train, {a.valid} valid, {a.test} test pairs to {a.out_dir} "
          f"({a.src_lang} -> {a.tgt_lang}, seed {a.seed})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
