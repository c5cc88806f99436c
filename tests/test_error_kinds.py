"""Errors by kind, the same in every layer: a wrong Python type is an AclnnTypeError (also a TypeError), a wrong
value a plain AclnnError (a ValueError); both carry their status, so ``except AclnnError`` keeps working; an array
whose dtype or shape is refused stays AclnnError 161002.  And conv_tbc_backward's named result."""
import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc import AclnnError, AclnnTypeError, conv_tbc, conv_tbc_backward


def _arrays(dtype=np.float32):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 2, 3)).astype(dtype)
    w = rng.standard_normal((3, 3, 4)).astype(dtype)
    b = rng.standard_normal(4).astype(dtype)
    dy = rng.standard_normal((6 + 2 - 3 + 1, 2, 4)).astype(dtype)
    return dy, x, w, b


def _forward(pad=1, x=None, **kw):
    dy, x0, w, b = _arrays()
    return conv_tbc(x0 if x is None else x, w, b, pad, **kw)


def _backward(pad=1, x=None, **kw):
    dy, x0, w, b = _arrays()
    return conv_tbc_backward(dy, x0 if x is None else x, w, b, pad, **kw)


def test_the_type_error_class_is_every_kind_it_promises():
    assert issubclass(AclnnTypeError, AclnnError)
    assert issubclass(AclnnTypeError, TypeError) and issubclass(AclnnTypeError, ValueError)
    assert not issubclass(AclnnError, TypeError)
    assert "AclnnTypeError" in pc.__all__


WRONG_TYPES = [  # (what, call kwargs, word the message names)
    ("float pad", {"pad": 1.0}, "pad"),
    ("str pad", {"pad": "1"}, "pad"),
    ("list input", {"x": np.zeros((6, 2, 3), np.float32).tolist()}, "input"),
    ("str num_threads", {"num_threads": "2"}, "num_threads"),
    ("int soc", {"soc": 910}, "soc"),
    ("float cube_math_type", {"cube_math_type": 3.0}, "cube_math_type"),
    ("int accumulation", {"accumulation": 1}, "accumulation"),
]
WRONG_VALUES = [
    ("pad out of range", {"pad": 300}, "pad"),
    ("num_threads 0", {"num_threads": 0}, "num_threads"),
    ("unknown soc", {"soc": "ascend999"}, "soc"),
    ("unknown cube_math_type name", {"cube_math_type": "USE_HF33"}, "cube_math_type"),
    ("unknown accumulation", {"accumulation": "seq"}, "accumulation"),
]


@pytest.mark.parametrize("call", [_forward, _backward], ids=["conv_tbc", "conv_tbc_backward"])
@pytest.mark.parametrize("what, kw, word", WRONG_TYPES, ids=[c[0] for c in WRONG_TYPES])
def test_a_wrong_python_type_is_a_type_error_with_its_status(call, what, kw, word):
    with pytest.raises(AclnnTypeError) as e:
        call(**kw)
    assert isinstance(e.value, TypeError) and isinstance(e.value, AclnnError)
    assert e.value.status == 161002 and word in str(e.value)
    assert pc.aclGetRecentErrMsg() == e.value.message


@pytest.mark.parametrize("call", [_forward, _backward], ids=["conv_tbc", "conv_tbc_backward"])
@pytest.mark.parametrize("what, kw, word", WRONG_VALUES, ids=[c[0] for c in WRONG_VALUES])
def test_a_wrong_value_is_a_value_error_not_a_type_error(call, what, kw, word):
    with pytest.raises(AclnnError) as e:
        call(**kw)
    assert not isinstance(e.value, TypeError) and isinstance(e.value, ValueError)
    assert e.value.status == 161002 and word in str(e.value)


@pytest.mark.parametrize("call", [_forward, _backward], ids=["conv_tbc", "conv_tbc_backward"])
def test_a_refused_dtype_or_shape_stays_a_plain_aclnn_error_161002(call):
    for x in (np.zeros((6, 2, 3), np.float64), np.zeros((6, 2, 5), np.float32), np.zeros((6, 2), np.float32)):
        with pytest.raises(AclnnError) as e:
            call(x=x)
        assert type(e.value) is AclnnError and e.value.status == 161002


def test_a_missing_array_stays_161001():
    dy, x, w, b = _arrays()
    with pytest.raises(AclnnError) as e:
        conv_tbc_backward(dy, None, w, b, 1)
    assert type(e.value) is AclnnError and e.value.status == 161001


def test_the_backward_result_is_a_named_tuple_that_unpacks_as_before():
    dy, x, w, b = _arrays()
    r = conv_tbc_backward(dy, x, w, b, 1)
    assert isinstance(r, tuple) and len(r) == 3
    assert r._fields == ("grad_input", "grad_weight", "grad_bias")
    gi, gw, gb = r
    assert gi is r.grad_input and gw is r.grad_weight and gb is r.grad_bias
    assert gi.shape == x.shape and gw.shape == w.shape and gb.shape == b.shape
    # the bias gradient is the sum of grad_output over T_out and B (exact in float64 for these few terms)
    np.testing.assert_allclose(r.grad_bias, dy.astype(np.float64).sum(axis=(0, 1)), rtol=4 * 12 * 2 ** -24)
    assert r is not conv_tbc_backward(dy, x, w, b, 1)           # a new result per call (the cached plan path)


# ---- the torch bridge raises the same kinds ---------------------------------------------------------------
torch = pytest.importorskip("torch", reason="the torch bridge's checks need torch")


def _bridge(pad=1, x=None, **emulation):
    from pyconvtbc.torch import conv_tbc as tconv
    _, x0, w, b = (torch.from_numpy(a) for a in _arrays())
    return tconv(x0 if x is None else x, w, b, pad, **emulation)


@pytest.mark.parametrize("kw", [{"pad": 1.0}, {"pad": "1"}, {"x": [[[0.0] * 3] * 2] * 6},
                                {"x": np.zeros((6, 2, 3), np.float32)}],
                         ids=["float pad", "str pad", "list input", "ndarray input"])
def test_the_torch_bridge_raises_the_same_type_error(kw):
    with pytest.raises(AclnnTypeError) as e:
        _bridge(**kw)
    assert isinstance(e.value, TypeError) and e.value.status == 161002


@pytest.mark.parametrize("kw", [{"pad": 300}, {"cube_math_type": "USE_HF33"}, {"soc": "ascend999"}],
                         ids=["pad out of range", "unknown cube_math_type name", "unknown soc"])
def test_the_torch_bridge_raises_the_same_value_error(kw):
    with pytest.raises(AclnnError) as e:
        _bridge(**kw)
    assert not isinstance(e.value, TypeError) and e.value.status == 161002


def test_a_float64_tensor_is_an_aclnn_error_161002_in_the_bridge_too():
    with pytest.raises(AclnnError) as e:
        _bridge(x=torch.zeros(6, 2, 3, dtype=torch.float64))
    assert e.value.status == 161002 and isinstance(e.value, TypeError)       # a TypeError as it always was
    with pytest.raises(AclnnError) as e2:
        _forward(x=np.zeros((6, 2, 3), np.float64))
    assert e2.value.status == 161002


@pytest.mark.parametrize("mistake", [{"pad": 1.0}, {"pad": 300}, {"soc": 910}, {"soc": "ascend999"}],
                         ids=["float pad", "pad out of range", "int soc", "unknown soc"])
def test_one_mistake_one_kind_in_both_layers(mistake):
    kinds = []
    for call in (_forward, _bridge):
        with pytest.raises(AclnnError) as e:
            call(**mistake)
        kinds.append((isinstance(e.value, TypeError), e.value.status))
    assert kinds[0] == kinds[1]


def test_conv_tbc_layer_sizes_by_kind():
    from pyconvtbc.torch import ConvTBC
    with pytest.raises(AclnnTypeError):
        ConvTBC(3, 4, 2.5)
    with pytest.raises(AclnnError) as e:
        ConvTBC(3, 4, 0)
    assert not isinstance(e.value, TypeError)
