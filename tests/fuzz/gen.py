"""Hypothesis strategy `programs()`: random, mostly well-typed Python functions over the
torch API (spec/testing.md, "What is generated").

How programs stay well-typed: every candidate statement is *executed* while it is drawn,
in eager mode, on the real inputs of every call (one namespace per call).  A statement that
raises is redrawn, except that now and then it is kept as the program's last statement:
then the program tests that refcomp raises the same exception type as eager.  Shapes,
dtypes, promotion, views and data-dependent sizes therefore never need a second model
here: the statement templates only pick plausible operands (by rank and dtype kind), and
eager decides.

Everything is drawn through hypothesis, so a failing program shrinks (fewer statements,
simpler templates, smaller shapes, contiguous inputs, seed 0).

KNOWN_OPEN: features excluded while their bug is open, each naming its corpus file (the
corpus replays the bug as a strict xfail, so it is never hidden).  When a fix lands, its
entry is deleted here and the corpus file's STATUS flips to "fixed".
"""

import functools
import importlib.util
import math
import re
import warnings
from pathlib import Path

import torch
from hypothesis import strategies as st

from tests.fuzz.inputs import DTYPES, layout_fits, make
from tests.fuzz.program import MUST_CAPTURE, Program, namespace

# feature -> corpus file(s) (tests/fuzz/corpus/<file>) whose open bug excludes it.  Features
# are generator constructs, or (prefix "check:") a comparison the runner relaxes; excluded
# on a backend while one of its files is open there.
KNOWN_OPEN: dict = {
    # none open (Nov 24); e.g. "check:fresh_output_strides": "some_corpus_file.py"
}

BUILTIN_NAMES = set(namespace())
MAX_NUMEL = 4096        # a statement producing a bigger tensor is redrawn
MAX_RANK = 6
FLOAT_NAMES = ["float32", "float64", "float16", "bfloat16"]
INT_NAMES = ["int64", "int32"]


CORPUS = Path(__file__).parent / "corpus"


@functools.cache
def corpus_entry(name: str):
    """The module of tests/fuzz/corpus/<name> (STATUS, BACKENDS, SYMPTOM, SOURCE, INPUTS)."""
    path = CORPUS / name
    spec = importlib.util.spec_from_file_location(f"fuzz_corpus_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def open_features(backend=None) -> frozenset:
    """KNOWN_OPEN features whose corpus file is open on `backend` (None: on any backend)."""
    out = set()
    for feature in KNOWN_OPEN:
        for name in known_open_files(feature):
            entry = corpus_entry(name)
            if entry.STATUS == "open" and (backend is None or backend in entry.BACKENDS):
                out.add(feature)
    return frozenset(out)


def known_open_files(feature) -> tuple:
    files = KNOWN_OPEN[feature]
    return (files,) if isinstance(files, str) else tuple(files)


def relaxed_checks(backend=None) -> frozenset:
    """The runner checks relaxed on `backend` while their bug is open there (the corpus
    replays the bug strictly)."""
    return frozenset(f for f in open_features(backend) if f.startswith("check:"))


class Skip(Exception):
    """A template has no fitting operands in this program: draw another."""


# --------------------------------------------------------------------------- state

class Env:
    """The program drawn so far, executed on the inputs of every call."""

    def __init__(self, program_inputs, open_features=frozenset()):
        self.open = open_features            # KNOWN_OPEN features not to generate
        self.calls = program_inputs          # per call: [(shape, dtype, layout, seed)]
        self.inputs = [f"x{i}" for i in range(len(program_inputs[0]))]
        self.tensors = list(self.inputs)     # names bound to tensors (in every call)
        self.scalars = []                    # names bound to Python numbers
        self.body = []                       # accepted statements (unindented source)
        self.counter = 0
        self.raised = False                  # the last statement raises in some call
        self.reset()

    def reset(self):
        self.ns = []
        for call in self.calls:
            ns = namespace()
            for name, spec in zip(self.inputs, call):
                ns[name] = make(*spec)
            self.ns.append(ns)
        for code in self.body:
            self._run(code)

    def _run(self, code):
        # Seeded per statement and call: the generator reads the values it made (`pick`'s
        # predicates), so a statement that draws random numbers (dropout, normal_) must
        # draw the same ones each time hypothesis replays the same choices, or it stops
        # with FlakyStrategyDefinition ("Inconsistent data generation"; the final loop of
        # session 12, seed 2027, died of it after 3,000 programs).
        with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
            warnings.simplefilter("ignore")
            for k, ns in enumerate(self.ns):
                torch.manual_seed(k)
                exec(code, ns)

    def enabled(self, feature):
        return feature not in self.open

    def fresh(self, prefix="v"):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def val(self, name):
        return self.ns[0][name]

    def try_add(self, code, keep_raising):
        """Execute `code` in every call; True if it was accepted."""
        try:
            self._run(code)
        except Exception:
            self.reset()
            if keep_raising:
                self.body.append(code)
                self.raised = True
                return True
            return False
        new = [n for n in self.ns[0] if n not in self.tensors and n not in self.scalars
               and n not in BUILTIN_NAMES and not n.startswith("__") and n not in ("i", "k")]
        tensors, scalars = [], []
        for n in new:
            vals = [ns.get(n) for ns in self.ns]
            if all(isinstance(v, torch.Tensor) for v in vals):
                tensors.append(n)
            elif all(type(v) in (int, float, bool) for v in vals):
                scalars.append(n)
        too_big = any(ns[n].numel() > MAX_NUMEL or ns[n].dim() > MAX_RANK
                      for ns in self.ns for n in tensors)
        # KNOWN_OPEN noop_conversion: a conversion that returned an existing tensor itself.
        noop = (not self.enabled("noop_conversion") and CONVERSION.search(code) is not None
                and any(self.ns[0][n] is v for n in new
                        for m, v in self.ns[0].items() if m not in new))
        if too_big or noop:
            self.reset()
            return False
        self.tensors += tensors
        self.scalars += scalars
        self.body.append(code)
        return True


CONVERSION = re.compile(r"\.(to|float|double|half|bfloat16|long|int|bool|type_as)\(")


def pick(draw, env, pred=None, names=None):
    names = env.tensors if names is None else names
    ok = [n for n in names if pred is None or pred(env.val(n))]
    if not ok:
        raise Skip
    return draw(st.sampled_from(ok))


def is_float(t):
    return t.dtype.is_floating_point


def is_int(t):
    return not t.dtype.is_floating_point and t.dtype != torch.bool


def rank_at_least(k):
    return lambda t: t.dim() >= k


def dim(draw, t, extra=0):
    """A dim index valid for t (negative half the time); rank 0 accepts 0 and -1."""
    r = max(t.dim() + extra, 1)
    return draw(st.integers(-r, r - 1))


def scalar(draw, env, kinds=("int", "float", "bool")):
    choices = []
    if "int" in kinds:
        choices += ["2", "-1", "3", "0"]
    if "float" in kinds:
        choices += ["0.5", "-1.5", "2.0", "1e-3"]
    if "bool" in kinds:
        choices += ["True"]
    choices += env.scalars
    return draw(st.sampled_from(choices))


def keepdim(draw):
    return draw(st.sampled_from(["", ", keepdim=True", ", keepdim=False"]))


# --------------------------------------------------------------------------- templates

TEMPLATES = []   # (weight, function(draw, env) -> code)


def template(weight=1):
    def deco(fn):
        TEMPLATES.append((weight, fn))
        return fn
    return deco


UNARY_ANY = ["torch.abs({a})", "-{a}", "{a}.clone()", "torch.square({a})", "{a}.sign()",
             "torch.clamp({a}, min={s})", "{a}.clamp(-2, 2)", "{a}.to(torch.float32)",
             "{a}.float()", "{a}.double()", "{a}.half()", "{a}.bfloat16()", "{a}.long()",
             "{a}.int()", "{a}.bool()", "{a}.contiguous()", "{a} * 1", "torch.logical_not({a})",
             "{a}.to(torch.int32)", "{a}.clone(memory_format=torch.contiguous_format)",
             "torch.ones_like({a})", "torch.full_like({a}, {s})", "torch.zeros_like({a}) + {a}",
             "{a}.detach()", "{a}.to({a}.dtype, copy=True)",
             # memory formats (a copy unless already in the format asked for)
             "{a}.contiguous(memory_format=torch.channels_last) if {a}.dim() == 4"
             " else {a}.contiguous()",
             "{a}.clone(memory_format=torch.channels_last) if {a}.dim() == 4 else {a}.clone()",
             "{a}.to(memory_format=torch.channels_last) if {a}.dim() == 4 else {a}",
             "{a}.clone(memory_format=torch.preserve_format)",
             "torch.empty_like({a}, memory_format=torch.contiguous_format).copy_({a})"]
UNARY_FLOAT = ["torch.relu({a})", "torch.sigmoid({a})", "torch.tanh({a})",
               "torch.exp({a}.clamp(max=4))", "torch.log({a}.abs() + 1)", "torch.sqrt({a}.abs())",
               "torch.sin({a})", "torch.cos({a})", "{a}.floor()", "{a}.ceil()", "torch.round({a})",
               "torch.trunc({a})", "{a}.frac()", "torch.reciprocal({a})", "torch.erf({a})",
               "F.gelu({a})", "F.silu({a})", "torch.rsqrt({a}.abs() + 0.5)",
               "torch.nan_to_num({a}.log())", "torch.isnan({a}.sqrt())", "F.softplus({a})",
               "F.leaky_relu({a}, 0.1)", "F.hardtanh({a})", "torch.expm1({a}.clamp(max=3))",
               "torch.log1p({a}.abs())", "{a}.pow(2)", "{a}.abs() ** 0.5", "torch.atan({a})",
               "F.elu({a})", "torch.sinh({a}.clamp(-3, 3))", "{a}.sqrt()",
               # random draws (the runner seeds each call, eager's and compiled alike)
               "torch.rand_like({a}) + {a}", "torch.randn_like({a})", "F.dropout({a}, 0.5)",
               "torch.bernoulli({a}.sigmoid())", "F.dropout({a}, 0.25) * 2",
               "torch.poisson({a}.abs())", "torch.rrelu({a}, training=True)",
               "torch.normal({a}, {a}.abs())", "torch.normal({a}, 0.5)",
               # float -> narrow int casts wrap (NaN and out of range: see spec/ops.md)
               "({a} * 100).to(torch.uint8)", "({a} * 50).to(torch.int8)",
               "({a} / 0).int()"]
UNARY_INT = ["{a} // 2", "{a} % 3", "torch.bitwise_not({a})", "{a} & 3", "{a}.abs()",
             "{a} * {a}", "{a} // -3", "{a}.remainder(4)", "{a} / 2", "{a}.float().mean()"]


# Image ops: on a 4-d float value, or a 2-d/3-d one viewed as (N, 1, H, W); the weights
# are deterministic (linspace, not symmetric: see "Ties" in spec/testing.md).
IMAGE = ["F.conv2d({x}, torch.linspace(-1, 1.25, 2 * {x}.shape[1] * 9, dtype={x}.dtype)"
         ".reshape(2, {x}.shape[1], 3, 3), padding=1)",
         "F.conv2d({x}, torch.linspace(-1, 1.25, 3 * {x}.shape[1], dtype={x}.dtype)"
         ".reshape(3, {x}.shape[1], 1, 1), stride=2)",
         "F.conv2d({x}, torch.linspace(-1, 1.25, 2 * {x}.shape[1] * 4, dtype={x}.dtype)"
         ".reshape(2, {x}.shape[1], 2, 2), torch.arange(2, dtype={x}.dtype), dilation=(1, 2))",
         "F.max_pool2d({x}, 2, ceil_mode=True)", "F.max_pool2d({x}, (1, 2), stride=1)",
         "F.avg_pool2d({x}, 2)", "F.avg_pool2d({x}, 3, stride=1, padding=1)",
         "F.adaptive_avg_pool2d({x}, 1)", "F.adaptive_avg_pool2d({x}, (1, None))",
         "F.interpolate({x}, scale_factor=2)", "F.interpolate({x}, size=(3, 2), mode='bilinear')",
         "F.batch_norm({x}, None, None, training=True)",
         "F.batch_norm({x}, torch.zeros({x}.shape[1]), torch.ones({x}.shape[1]))",
         "F.group_norm({x}, 1)", "F.instance_norm({x})", "F.pad({x}, (1, 0, 0, 1))",
         "F.pad({x}, (1, 1), value=0.5)", "F.relu(F.conv2d({x}, torch.ones(1, {x}.shape[1], 1, 1,"
         " dtype={x}.dtype))).contiguous(memory_format=torch.channels_last)",
         "F.pixel_shuffle({x}.repeat(1, 4, 1, 1), 2)", "F.unfold({x}, 2)",
         "{x}.contiguous(memory_format=torch.channels_last) * 2",
         "torch.flatten(F.adaptive_avg_pool2d({x}, 1), 1)"]


@template(3)
def image(draw, env):
    a = pick(draw, env, pred=lambda t: is_float(t) and 2 <= t.dim() <= 4)
    t = env.val(a)
    x = a if t.dim() == 4 else f"{a}.reshape(-1, 1, *{a}.shape[-2:])"
    form = draw(st.sampled_from(IMAGE))
    if "training=True" in form and any(_ambiguous_channels_last(
            ns[a] if t.dim() == 4 else _image_view(ns[a])) for ns in env.ns):
        # torch's CPU batch_norm backward in training mode is wrong for such an input:
        # eager's gradient is no answer to match (spec/correctness.md, "Known torch bugs").
        raise Skip
    return f"{env.fresh()} = " + form.format(x=x)


def _image_view(t):
    """The (N, 1, H, W) view the image template takes of a 2-d/3-d value, or None where
    that reshape raises (no elements: eager raises too)."""
    try:
        return t.reshape(-1, 1, *t.shape[-2:])
    except RuntimeError:
        return None


def _ambiguous_channels_last(t) -> bool:
    """Channels-last contiguous, but not contiguous, and with a size-1 dim whose stride
    is not the one a new channels-last tensor has (a permuted input)."""
    return t is not None and t.dim() == 4 and \
        t.is_contiguous(memory_format=torch.channels_last) and \
        not t.is_contiguous() and \
        t.stride() != torch.empty(t.shape, memory_format=torch.channels_last).stride()


@template(6)
def unary(draw, env):
    a = pick(draw, env)
    pool = list(UNARY_ANY)
    if is_float(env.val(a)):
        pool += UNARY_FLOAT
        if env.enabled("round_decimals"):
            pool.append("torch.round({a}, decimals=2)")
    elif is_int(env.val(a)):
        pool += UNARY_INT
    s = scalar(draw, env)
    return f"{env.fresh()} = " + draw(st.sampled_from(pool)).format(a=a, s=s)


BINARY = ["{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / {b}", "torch.maximum({a}, {b})",
          "torch.minimum({a}, {b})", "torch.where({a} > {b}, {a}, {b})", "{a} == {b}",
          "{a} < {b}", "{a} >= {b}", "{a} != {b}", "torch.add({a}, {b}, alpha=2)",
          "torch.where({b} > 0, {a}, {s})", "{a}.masked_fill({b} < 0, {s})",
          "torch.logical_and({a}, {b})", "torch.logical_or({a} > 0, {b})", "{a} + {b} * {s}",
          "{a}.mul({b}).sub({s})", "torch.sub({a}, {b}, alpha=3)", "torch.eq({a}, {b})",
          "{a}.expand_as({b}) + 0", "{a}.type_as({b})", "torch.where({a} > 0, {s}, {b})"]
BINARY_FLOAT = ["torch.atan2({a}, {b})", "{a} ** 2 + {b}", "{a}.abs() ** {b}",
                "torch.lerp({a}, {b}, 0.25)", "torch.fmod({a}, {b}.abs() + 1)",
                "torch.remainder({a}, {b}.abs() + 0.5)", "torch.hypot({a}, {b})",
                "torch.copysign({a}, {b})"]
BINARY_INT = ["{a} & {b}", "{a} | {b}", "{a} ^ {b}", "{a} // ({b}.abs() + 1)",
              "{a} % ({b}.abs() + 1)", "torch.div({a}, {b}.abs() + 1, rounding_mode='trunc')",
              "torch.div({a}, {b}.abs() + 1, rounding_mode='floor')"]
BINARY_INT_ZERO = ["{a} // {b}", "{a} % {b}", "torch.div({a}, {b}, rounding_mode='floor')",
                   "torch.remainder({a}, {b})", "torch.fmod({a}, {b})"]
SCALAR_FORMS = ["{a} + {s}", "{s} - {a}", "{a} * {s}", "{a} / {s}", "{s} * {a} + {a}",
                "{a} > {s}", "{a} ** 2", "{a} - {s}", "{s} / ({a}.abs() + 1)", "{a}.add({s})",
                "torch.mul({a}, {s})", "{a}.clamp(max={s})"]


@template(6)
def binary(draw, env):
    a = pick(draw, env)
    b = pick(draw, env)
    ta, tb = env.val(a), env.val(b)
    pool = BINARY + SCALAR_FORMS
    if is_float(ta) and is_float(tb):
        pool = pool + BINARY_FLOAT
    if is_int(ta) and is_int(tb):
        pool = pool + BINARY_INT + (BINARY_INT_ZERO if env.enabled("int_div_by_zero") else [])
    s = scalar(draw, env)
    form = draw(st.sampled_from(pool))
    if (not env.enabled("bool_scalar_sub") and ("-" in form or "sub(" in form)
            and (s == "True" or isinstance(env.ns[0].get(s), bool))):
        raise Skip
    return f"{env.fresh()} = " + form.format(a=a, b=b, s=s)


REDUCTIONS = ["{a}.sum()", "{a}.sum(dim={d}{kd})", "{a}.sum(({d}, {d2}){kd})", "{a}.amax({d}{kd})",
              "{a}.amin(dim={d}{kd})", "{a}.prod({d}{kd})", "{a}.any({d}{kd})", "{a}.all()",
              "{a}.argmax()", "{a}.argmax(dim={d}{kd})", "{a}.argmin({d}{kd})",
              "torch.count_nonzero({a}, dim={d})", "{a}.cumsum({d})", "{a}.max()", "{a}.min()",
              "{a}.sum(dtype=torch.float64)", "{a}.sum([{d}]{kd})", "torch.sum({a}, {d}{kd})",
              "{a}.cumprod(dim={d})", "torch.amax({a}, ({d}, {d2}))"]
REDUCTIONS_FLOAT = ["{a}.mean()", "{a}.mean({d}{kd})", "{a}.mean(dim=({d}, {d2}){kd})",
                    "{a}.var({d}{kd})", "{a}.var(dim={d}, correction={c}{kd})", "{a}.var()",
                    "{a}.std({d}, correction={c}{kd})", "torch.var({a}, dim=({d}, {d2}))",
                    "torch.logsumexp({a}, {d}{kd})", "{a}.norm(dim={d}{kd})",
                    "torch.linalg.vector_norm({a}, dim={d})", "{a}.nansum({d})",
                    "torch.linalg.vector_norm({a}, ord=1)", "{a}.norm()", "{a}.std()",
                    "torch.nanmean({a}, {d})", "{a}.logcumsumexp({d})"]


def _one_variance_of_equal_elements(t, dims) -> bool:
    """Whether var/std of `t` over `dims` (None: every dim) is one number over two or more
    equal elements.  Its exact value is 0; eager's one-result kernel takes the mean in
    t's dtype, rounded by the order of its sum, so it is 0 or a few ulps, and std's
    gradient there is 0 or O(1) (spec/testing.md, "Ties"; Note [How ATen computes var]
    in ir/passes/decompose.py).  refcomp gives the exact 0."""
    if t.dim() == 0 or t.numel() < 2:
        return False
    reduced = range(t.dim()) if dims is None else {d % t.dim() for d in dims}
    if any(n != 1 for i, n in enumerate(t.shape) if i not in reduced):
        return False
    flat = t.detach().reshape(-1)
    return bool((flat == flat[0]).all())


@template(5)
def reduction(draw, env):
    a = pick(draw, env)
    t = env.val(a)
    pool = REDUCTIONS + (REDUCTIONS_FLOAT if is_float(t) else [])
    form = draw(st.sampled_from(pool))
    d, d2 = dim(draw, t), dim(draw, t)
    if ".var(" in form or ".std(" in form or "torch.var(" in form:
        dims = None if "{d}" not in form else [d, d2] if "{d2}" in form else [d]
        if any(_one_variance_of_equal_elements(ns[a], dims) for ns in env.ns):
            raise Skip
    expr = form.format(a=a, d=d, d2=d2, kd=keepdim(draw), c=draw(st.sampled_from([0, 1, 2])))
    return f"{env.fresh()} = {expr}"


MULTI_ATTR = ["{a}.max({d}).values", "{a}.max(dim={d}{kd}).indices", "{a}.min({d}).indices",
              "torch.sort({a}, dim={d}, stable=True).values",
              "torch.sort({a}, dim={d}, stable=True).indices",
              "{a}.topk(1, dim={d}).values", "{a}.cummax({d}).values", "{a}.cummax({d}).indices",
              "{a}.cummin({d}).values", "{a}.median({d}{kd}).values", "{a}.mode({d}).values",
              "torch.aminmax({a}, dim={d}{kd}).min", "torch.aminmax({a}).max",
              "{a}.kthvalue(1, {d}).values", "torch.max({a}, {d}, True).values"]
MULTI_INDEX = ["{a}.max({d})[0]", "{a}.max({d}{kd})[1]", "{a}.min(dim={d})[0]",
               "{a}.sort(dim={d}, descending=True, stable=True)[1]", "{a}.sort(stable=True)[0]",
               "{a}.topk(1)[0]", "{a}.cummax(dim={d})[1]", "{a}.cummin({d})[0]",
               "{a}.median({d})[0]", "{a}.median()", "torch.aminmax({a}, dim={d})[0]",
               "torch.max({a}, {d}, True)[1]", "{a}.argsort({d}, stable=True)",
               "{a}.msort()"]
MULTI_UNPACK = ["{t}, {t2} = {a}.max({d}{kd})", "{t}, {t2} = {a}.min(dim={d})",
                "{t}, {t2} = {a}.sort({d}, stable=True)", "{t}, {t2} = torch.aminmax({a})",
                "{t}, {t2} = {a}.cummax({d})", "{t}, {t2} = torch.aminmax({a}, dim={d}{kd})"]
MULTI_UNPACK_FLOAT = ["{t}, {t2} = torch.var_mean({a}, {d}{kd})",
                      "{t}, {t2} = torch.std_mean({a}, dim={d}, correction=0)",
                      "{t}, {t2} = torch.var_mean({a})"]


@template(4)
def multi_output(draw, env):
    a = pick(draw, env, lambda t: t.dtype != torch.bool)
    t = env.val(a)
    pool = MULTI_INDEX + MULTI_UNPACK + (MULTI_UNPACK_FLOAT if is_float(t) else [])
    if env.enabled("return_types"):
        pool = pool + MULTI_ATTR
    form = draw(st.sampled_from(pool))
    d = dim(draw, t)
    if "median({d}" in form and t.dim() and any(
            -ns[a].dim() <= int(d) < ns[a].dim() and ns[a].stride(int(d)) == 0 and
            ns[a].shape[int(d)] > 1 for ns in env.ns):  # (a value's rank may differ by call)
        # torch's median(dim) over a dim of stride 0 (an expanded input) reads out of
        # bounds: eager's answer is garbage (spec/correctness.md, "Known torch bugs").
        raise Skip
    expr = form.format(a=a, d=d, kd=keepdim(draw), t=env.fresh(), t2=env.fresh())
    return expr if "=" in form.split("(")[0] else f"{env.fresh()} = {expr}"


def index_expr(draw, t):
    """A basic-indexing subscript for t: ints, slices (steps, negatives), None, Ellipsis."""
    items = []
    n = draw(st.integers(1, max(1, t.dim())))
    for _ in range(n):
        items.append(draw(st.sampled_from(
            [":", "1:", "::2", "-1", "0", ":-1", "None", "1::2", "-2:", ":1", "...", ":, None"])))
    if draw(st.integers(0, 19)) == 19:
        items.append("::-1")    # eager raises ValueError: a negative step
    return ", ".join(items)


VIEWS = ["{a}.reshape(-1)", "{a}.view(-1)", "{a}.flatten()", "{a}.flatten({d})",
         "{a}.unsqueeze({du})", "{a}.squeeze()", "{a}.squeeze({d})", "{a}.transpose({d}, {d2})",
         "{a}.narrow({d}, 0, 1)", "{a}.narrow({d}, 1, {a}.shape[{d}] - 1)", "{a}.select({d}, 0)",
         "{a}.select({d}, -1)", "{a}.unbind({d})[0]", "{a}.chunk(2, {d})[-1]",
         "{a}.split(2, {d})[0]", "{a}.split([1, {a}.shape[{d}] - 1], {d})[1]",
         "{a}.expand(2, *{a}.shape)", "{a}.movedim({d}, {d2})", "{a}.unflatten({d}, (1, -1))",
         "{a}.view_as({a})", "{a}.reshape({a}.shape[0], -1)", "{a}[{a}.shape[0] // 2:]",
         "{a}.permute({perm})", "{a}.t()", "{a}.mT", "{a}.diagonal()",
         "{a}.diagonal(0, {d}, {d2})", "torch.broadcast_to({a}, (2,) + tuple({a}.shape))",
         "{a}.view({a}.shape)", "{a}.reshape({a}.shape[::-1])", "{a}.contiguous().view(-1, 1)",
         "{a}[{idx}]", "{a}[{idx}]", "{a}[{idx}]", "{a}.unsqueeze(-1).expand(*{a}.shape, 2)",
         "{a}.swapaxes({d}, {d2})", "{a}.flatten(0, {d})", "{a}.T if {a}.dim() == 2 else {a}"]


@template(6)
def view(draw, env):
    a = pick(draw, env)
    t = env.val(a)
    perm = list(range(t.dim()))
    perm = draw(st.permutations(perm)) if perm else []
    expr = draw(st.sampled_from(VIEWS)).format(
        a=a, d=dim(draw, t), d2=dim(draw, t), du=dim(draw, t, extra=1),
        perm=", ".join(map(str, perm)) if perm else "", idx=index_expr(draw, t))
    return f"{env.fresh()} = {expr}"


INDEXING = ["{a}[torch.tensor([0, -1])]", "{a}[{a} > 0]", "{a}[:, [0, -1]]",
            "{a}[[0, 0]]", "{a}.index_select({d}, torch.tensor([0]))",
            "{a}.index_select({d}, torch.tensor([0, 0]))",
            "torch.gather({a}, {d}, {a}.argsort({d}, stable=True))",
            "torch.take_along_dim({a}, {a}.argmax(dim={d}, keepdim=True), dim={d})",
            "torch.take_along_dim({a}, {a}.argsort(dim={d}, stable=True), dim={d})",
            "{a}.masked_fill({a} > 0, {s})", "{a}.masked_fill({b} < 0, {s})",
            "{a}.scatter({d}, {a}.argsort({d}, stable=True), {b})",
            "{a}.scatter({d}, {a}.argmax({d}, keepdim=True), {s})",
            "{a}.scatter_add({d}, {a}.argsort({d}, stable=True), {a})",
            "{a}.index_fill({d}, torch.tensor([0]), {s})", "{a}.nonzero()",
            "{a}.take(torch.tensor([0, 1]))", "{a}[{b} > 0]", "{a}[..., torch.tensor([1, 0])]",
            "{a}.index_add({d}, torch.tensor([0]), {a}.narrow({d}, 0, 1))",
            "torch.where({a} > 0)[0]", "{a}[torch.tensor([True])]",
            "{a}[torch.tensor([0], dtype=torch.int32)]", "{a}[torch.arange({a}.shape[0]) % 2 == 0]"]


@template(4)
def indexing(draw, env):
    a = pick(draw, env)
    b = pick(draw, env)
    t = env.val(a)
    expr = draw(st.sampled_from(INDEXING)).format(a=a, b=b, d=dim(draw, t), s=scalar(draw, env))
    return f"{env.fresh()} = {expr}"


STRUCTURAL = ["torch.cat([{a}, {b}], dim={d})", "torch.cat([{a}, {a}])", "torch.cat(({a}, {a}), {d})",
              "torch.stack([{a}, {b}], dim={du})", "torch.stack([{a}, {a} * 2])", "{a}.flip({d})",
              "{a}.flip(dims=({d}, {d2}))", "{a}.roll(1, {d})", "torch.roll({a}, shifts=-1)",
              "{a}.repeat(2, *([1] * {a}.dim()))", "{a}.tril()", "{a}.triu(1)",
              "torch.tril({a}, -1)", "{a}.expand_as({b})", "{a}.repeat_interleave(2, dim={d})",
              "torch.arange({a}.shape[{d}])", "torch.zeros(3, dtype={a}.dtype)",
              "torch.ones({a}.shape, dtype=torch.float32) * {a}", "{a}.new_zeros(2, 3)",
              "torch.arange(6).reshape(2, 3).to({a}.dtype)", "torch.full((2,), {s})",
              "torch.zeros_like({a}, dtype=torch.float64)", "torch.hstack([{a}, {a}])",
              "{a}.tile((2,))", "torch.linspace(0, 1, 5)"]


@template(3)
def structural(draw, env):
    a = pick(draw, env)
    b = pick(draw, env)
    t = env.val(a)
    expr = draw(st.sampled_from(STRUCTURAL)).format(
        a=a, b=b, d=dim(draw, t), d2=dim(draw, t), du=dim(draw, t, extra=1),
        s=scalar(draw, env))
    return f"{env.fresh()} = {expr}"


LINALG = ["{a} @ {a}.mT", "torch.matmul({a}, {b})", "{a} @ {b}",
          "torch.einsum('...ij,...kj->...ik', {a}, {a})", "torch.einsum('...i,...i->...', {a}, {a})",
          "torch.einsum('ij->ji', {a})", "torch.mm({a}, {a}.t())",
          # Asymmetric weights (spec/testing.md, "Ties"): symmetric ones cancel exactly on an
          # expanded input, and what the next op makes of an exact 0 is rounding.
          "F.linear({a}, torch.linspace(-1, 1.25, 3 * {a}.shape[-1], dtype={a}.dtype).reshape(3, -1))",
          "F.linear({a}, torch.ones(2, {a}.shape[-1], dtype={a}.dtype), torch.arange(2, dtype={a}.dtype))",
          "torch.outer({a}.flatten(), {a}.flatten()[:3])", "torch.dot({a}.flatten(), {a}.flatten())",
          "torch.bmm({a}, {a}.transpose(1, 2))", "{a}.mT @ {a}"]
NORMS = ["torch.softmax({a}, {d})", "{a}.softmax(dim={d})", "F.log_softmax({a}, dim={d})",
         "torch.softmax({a}, {d}, dtype=torch.float64)", "F.layer_norm({a}, {a}.shape[-1:])",
         "F.layer_norm({a}, {a}.shape[-2:], eps=1e-3)", "F.normalize({a}, dim={d})",
         "F.normalize({a}, p=1, dim={d})", "{a}.log_softmax({d})",
         "F.layer_norm({a}, {a}.shape[-1:], torch.ones({a}.shape[-1], dtype={a}.dtype), None)",
         "F.softmax({a} * 2, dim=-1)"]


def _well_conditioned_layer_norm(t, ndims: int, eps: float = 1e-5) -> bool:
    """Whether layer_norm of `t` over its last `ndims` dims is well conditioned: with values
    near-constant over a group, (x - mean) / sqrt(var + eps) is rounding noise amplified by
    |mean| / sqrt(var + eps), so eager's answer depends on its order of summation
    (spec/testing.md, "Ties"; a group of one element is 0 in exact arithmetic)."""
    nd = min(ndims, t.dim())
    if t.numel() == 0 or nd == 0:
        return True
    x = t.detach().double().reshape(-1, math.prod(t.shape[-nd:]))
    if x.shape[-1] == 1:
        return False
    spread = (x.var(-1, correction=0) + eps).sqrt()
    return bool((x.mean(-1).abs() / spread).max() < 100)


@template(3)
def linalg_norm(draw, env):
    a = pick(draw, env, is_float)
    b = pick(draw, env, is_float)
    t = env.val(a)
    pool = LINALG + NORMS
    form = draw(st.sampled_from(pool))
    if "layer_norm" in form and not all(
            _well_conditioned_layer_norm(ns[a], 1 if ".shape[-1:]" in form else 2)
            for ns in env.ns):
        raise Skip
    expr = form.format(a=a, b=b, d=dim(draw, t))
    return f"{env.fresh()} = {expr}"


INPLACE = ["{v}.add_({b})", "{v}.mul_({s})", "{v}[1:] *= {s}", "{v}.diagonal().fill_({s})",
           "{v}.transpose(0, 1)[0].add_(1)", "{v}.view(-1).mul_(2)", "{v}.copy_({b})",
           "{v}[0] = {s}", "{v}[{v} > 0] = {s}", "{v} += {b}", "{v}.clamp_(min=-1)",
           "{v}.zero_()", "{v}.masked_fill_({v} < 0, {s})", "{v}.fill_({s})",
           "{v}.sub_({b}, alpha=2)", "{v}.unsqueeze(0).add_(1)", "{v}[..., :1] = {b}[..., :1]",
           "{v}.narrow(0, 0, 1).mul_({s})", "{v}[{idx}] = {s}", "{v}[{idx}] += 1",
           "{v}.select(-1, 0).copy_({b}.select(-1, 0))", "{v} *= {s}", "{v}.neg_()",
           "{v}.index_fill_(0, torch.tensor([0]), {s})", "{v}.t_()", "{v}.unsqueeze_(0)",
           "{v}[:, 0] = {b}[0]", "{v}.reshape(-1)[::2].add_(1)", "{v}.flip(0).add_(1)",
           "{v}.scatter_(0, {v}.argsort(0, stable=True), {v}.clone())", "{v}.abs_()"]
INPLACE_FLOAT = ["{v}.relu_()", "{v}.sigmoid_()", "{v}.exp_()", "{v}.div_(2)", "{v}.sqrt_()",
                 "{v}.clamp_(max={s})", "{v} /= 3", "torch.nn.functional.relu_({v})",
                 "{v}.tanh_()", "{v}.addcmul_({b}, {b}, value=0.5)",
                 "{v}.uniform_()", "{v}.normal_(0, 2)", "{v}.bernoulli_(0.5)"]


@template(6)
def inplace(draw, env):
    on_input = draw(st.integers(0, 2)) == 0
    v = pick(draw, env, names=env.inputs if on_input else env.tensors)
    b = pick(draw, env)
    t = env.val(v)
    pool = INPLACE + (INPLACE_FLOAT if is_float(t) else [])
    return draw(st.sampled_from(pool)).format(v=v, b=b, s=scalar(draw, env),
                                              idx=index_expr(draw, t))


# Writes through a view of a fresh intermediate that refcomp must capture (spec/
# correctness.md, "Mutation and write-back"): the oracle (tests/fuzz/runner.py,
# `capture_failure`) fails a program whose marked line is a graph break.  `{c}` is a
# contiguous clone nothing else views; the value written is a Python number of the
# tensor's kind, so no operand overlaps the write and no cast fails.
VIEW_WRITES = ["{c}.view(-1).mul_(2)", "{c}.unsqueeze(0).add_(1)", "{c}[None] *= 3",
               "{c}.reshape(-1)[::2] = {s}"]
VIEW_WRITES_RANKED = ["{c}[1:] *= 2", "{c}[0] = {s}", "{c}.narrow(0, 0, 1).add_({s})",
                      "{c}[..., ::2] += 1", "{c}.transpose(0, -1)[-1:].mul_(2)",
                      "{c}[:, None][1:] = {s}", "{c}.flatten()[1::3].sub_(1)",
                      "{c}.select(-1, 0).mul_({s})", "{c}.unflatten(0, (1, -1))[0] += 1",
                      "{c}.movedim(0, -1)[..., :1].add_(1)"]


@template(5)
def inplace_view(draw, env):
    a = pick(draw, env, pred=lambda t: t.dtype != torch.bool)
    t = env.val(a)
    c = env.fresh("w")
    forms = VIEW_WRITES + (VIEW_WRITES_RANKED if t.dim() else [])
    s = draw(st.sampled_from([2, -1, 3]) if not is_float(t) else st.sampled_from([0.5, -2.0, 3]))
    write = draw(st.sampled_from(forms)).format(c=c, s=s)
    return f"{c} = {a}.clone(memory_format=torch.contiguous_format)\n{write}{MUST_CAPTURE}"


@template(3)
def control(draw, env):
    a = pick(draw, env)
    t = env.val(a)
    k = draw(st.integers(0, 3))
    out = env.fresh()
    forms = [
        f"{out} = {a}\nfor i in range({k}):\n    {out} = {out} + i",
        f"{out} = {a}.clone()\nfor i in range({k}):\n    {out}.mul_(2)",
        f"{out} = {a} * 1\nfor i in range({a}.dim()):\n    {out} = {out}.sum(0) if {out}.dim() > 1 else {out}",
        f"if {a}.shape[0] > {k}:\n    {out} = {a} * 2\nelse:\n    {out} = {a}.sum(0)",
        f"if {a}.dim() > 1 and {a}.shape[-1] == {a}.shape[-2]:\n    {out} = {a} @ {a}\nelse:\n    {out} = {a} + 1",
        f"{out} = torch.stack([{a}[i] * i for i in range({a}.shape[0])])",
        f"{out} = sum([{a} * k for k in range({k} + 1)])",
        f"{out} = torch.cat([p.sum(0, keepdim=True) for p in {a}.unbind(0)])",
        f"{out} = {a}\nwhile {out}.dim() < 3:\n    {out} = {out}.unsqueeze(0)",
        f"{out} = [{a}, {a} + 1][{k} % 2]",
        f"{out} = {a} if {a}.numel() > {k} else -{a}",
        f"{out} = {a}\nif {a}.is_floating_point():\n    {out} = {out}.exp()",
    ]
    if not t.dim():
        forms = [f for f in forms if "shape[" not in f and "unbind" not in f]
    return draw(st.sampled_from(forms))


@template(4)
def graph_break(draw, env):
    a = pick(draw, env)
    out = env.fresh()
    s = env.fresh("s")
    forms = [
        "print(end='')",
        f"{s} = {a}.sum().item()",
        f"{s} = float({a}.float().mean())",
        f"{s} = bool({a}.any())",
        f"{s} = int({a}.sum())",
        f"{out} = OPAQUE({a})",
        f"{out} = OPAQUE({a}.clone())",
        # 0.3, not 0: many sums are 0 in exact arithmetic (a layer_norm's rows), and a
        # branch on their rounding compares rounding (spec/testing.md, "Ties").
        f"if {a}.sum() > 0.3:\n    {out} = {a} + 1\nelse:\n    {out} = {a} - 1",
        f"{out} = {a} * {a}.max().item()",
        f"print(end='')\n{out} = {a} + 1",
    ]
    return draw(st.sampled_from(forms))


@template(2)
def alias(draw, env):
    a = pick(draw, env)
    out = env.fresh()
    return draw(st.sampled_from([f"{out} = {a}", f"{out} = {a}.view_as({a})",
                                 f"{out} = {a}.detach()", f"{out} = {a}[...]",
                                 f"{out} = {a}.contiguous()", f"{out} = {a}.to({a}.dtype)"]))


WEIGHTED = [fn for weight, fn in TEMPLATES for _ in range(weight)]


# --------------------------------------------------------------------------- programs

@st.composite
def shapes_of_calls(draw, ninputs):
    """Per call, the shape of each input: a common 'universe' shape (rank <= 4) whose
    trailing dims each input takes (dropped leading dims), some of them 1 (broadcast).
    Later calls change some universe sizes (dynamic sizes), now and then to 0."""
    rank = draw(st.integers(0, 4))
    ncalls = draw(st.integers(1, 3))
    sizes = [draw(st.integers(1, 4)) for _ in range(rank)]
    universe = [sizes]
    for _ in range(ncalls - 1):
        # Size 0 now and then: empty tensors through every statement.
        universe.append([s if draw(st.booleans()) else draw(st.sampled_from([1, 2, 3, 4, 5, 0]))
                         for s in sizes])
    per_input = []
    for i in range(ninputs):
        r = rank if i == 0 else draw(st.integers(0, rank))
        ones = [draw(st.integers(0, 5)) == 0 for _ in range(r)]
        per_input.append((r, ones))
    calls = []
    for u in universe:
        call = []
        for r, ones in per_input:
            dims = u[len(u) - r:] if r else []
            call.append(tuple(1 if one else s for s, one in zip(dims, ones)))
        calls.append(call)
    return calls


@st.composite
def programs(draw, backend=None, max_statements=8, known_open=True):
    """A Program: source of `def f(x0..)` and the inputs of 1-3 calls; without the
    KNOWN_OPEN features open on `backend` (None: open on any backend) unless
    known_open=False."""
    ninputs = draw(st.integers(1, 3))
    shapes = draw(shapes_of_calls(ninputs))
    main = draw(st.sampled_from(["float32", "float32", "float64", "int64", "float16",
                                 "bfloat16", "int32", "bool"]))
    specs = []
    for i in range(ninputs):
        dtype = main if draw(st.integers(0, 3)) else draw(st.sampled_from(list(DTYPES)))
        rank = len(shapes[0][i])
        layouts = [lay for lay in ["contiguous", "transposed", "permuted", "step", "offset",
                                   "expanded", "channels_last"] if layout_fits(lay, rank)]
        layout = "contiguous" if draw(st.booleans()) else draw(st.sampled_from(layouts))
        # now and then a float input far from 0 (tests/fuzz/inputs.py, VALUES)
        shifted = DTYPES[dtype].is_floating_point and draw(st.integers(0, 7)) == 7
        specs.append((dtype, layout, draw(st.integers(0, 1000))) +
                     (("shifted",) if shifted else ()))
    calls = [[(shape, dtype, layout, seed + k) + tuple(rest)
              for shape, (dtype, layout, seed, *rest) in zip(call, specs)]
             for k, call in enumerate(shapes)]
    env = Env(calls, open_features(backend) if known_open else frozenset())
    for _ in range(draw(st.integers(1, max_statements))):
        for _attempt in range(10):
            fn = draw(st.sampled_from(WEIGHTED))
            try:
                code = fn(draw, env)
            except Skip:
                continue
            keep_raising = draw(st.integers(0, 24)) == 24  # shrinks to False
            if env.try_add(code, keep_raising):
                break
        if env.raised:
            break
    # Return 1-3 tensors (inputs, views, aliases and repeats allowed) and now and then a
    # Python number; as one value, a tuple or a list.
    pool = env.tensors + env.scalars
    if env.raised:
        pool = [n for n in pool if n in env.inputs] or env.inputs
    outs = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
    form = draw(st.sampled_from(["tuple", "tuple", "one", "list"]))
    if form == "one":
        ret = outs[0]
    elif form == "list":
        ret = "[" + ", ".join(outs) + "]"
    else:
        ret = ", ".join(outs) + ","
    lines = []
    for code in env.body:
        lines += ["    " + line for line in code.split("\n")]
    source = (f"def f({', '.join(env.inputs)}):\n" + "\n".join(lines)
              + ("\n" if lines else "") + f"    return {ret}\n")
    return Program(source, calls)
