"""SEMANTICS.md section 2: every rule, in order, with its status code and a message that names the
argument, the value seen and what was expected.  Phase 1 of the CANN layer and the NumPy layer."""
import ml_dtypes
import numpy as np
import pytest

import pyconvtbc as pc
from conftest import acl_problem, device_tensor, make_problem, phase1

NAMES = ("self", "input", "weight", "bias", "gradInput", "gradWeight", "gradBias")
INVALID, NULLPTR = 161002, 161001


def fresh(**kw):
    dy, x, w, b = make_problem(**kw)
    t, _ = acl_problem(dy, x, w, b)
    return t


def expect(t, status, *fragments, pad=1, cube=0):
    rc, ws, ex = phase1(t, pad, cube)
    assert rc == status, pc.aclGetRecentErrMsg()
    assert ws == 0 and ex is None
    msg = pc.aclGetRecentErrMsg()
    assert msg.startswith("aclnnConvTbcBackwardGetWorkspaceSize: ")
    for f in fragments:
        assert f in msg, (f, msg)
    return msg


def test_valid_problem_passes():
    rc, ws, ex = phase1(fresh())
    assert rc == 0 and ex is not None and ws >= 0


# ---- rule 1 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_null_pointer_each_argument(name):
    t = fresh()
    t[name] = None
    expect(t, NULLPTR, name, "None")


def test_null_pointer_order_wins_over_later_nulls_and_other_errors():
    t = fresh()
    t["bias"], t["gradBias"] = None, None
    t["self"] = "not a tensor"
    # nulls are checked before non-descriptors, in argument order
    expect(t, NULLPTR, "bias is a null pointer")


@pytest.mark.parametrize("name", NAMES)
def test_not_a_descriptor(name):
    t = fresh()
    t[name] = np.zeros(3, np.float32)
    expect(t, INVALID, name, "ndarray", "expected a live tensor descriptor")


def test_destroyed_descriptor():
    t = fresh()
    assert pc.aclDestroyTensor(t["weight"]) == 0
    expect(t, INVALID, "weight is a destroyed aclTensor")


def test_descriptor_with_invalid_fields_is_named_with_its_article():
    t = fresh()
    old = t["input"]
    t["input"] = pc.aclTensor(old.view_dims, old.data_type, [float(s) for s in old.strides], old.offset,
                              old.format, old.storage_dims, old.data)
    expect(t, INVALID, "input is an aclTensor; expected a valid tensor descriptor", "strides is [")


# ---- rule 2 -------------------------------------------------------------------------------------
def _retype(t, name, code):
    old = t[name]
    t[name] = pc.aclCreateTensor(old.view_dims, code, old.strides, old.offset, old.format, old.storage_dims,
                                 old.data)
    return t


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("code", [pc.ACL_DOUBLE, pc.ACL_INT32, pc.ACL_COMPLEX64, pc.ACL_DT_UNDEFINED, 99])
def test_bad_dtype(name, code):
    msg = expect(_retype(fresh(), name, code), INVALID, name, "data type", "expected one of FLOAT, FLOAT16, BF16")
    assert str(int(code)) in msg


@pytest.mark.parametrize("name", [n for n in NAMES if n != "gradWeight"])
@pytest.mark.parametrize("code", [pc.ACL_HIFLOAT8, pc.ACL_FLOAT8_E4M3FN])
def test_8bit_only_for_grad_weight(name, code):
    expect(_retype(fresh(), name, code), INVALID, name, "data type")


@pytest.mark.parametrize("code", [pc.ACL_HIFLOAT8, pc.ACL_FLOAT8_E4M3FN])
def test_8bit_grad_weight_accepted(code):
    rc, _, ex = phase1(_retype(fresh(), "gradWeight", code))
    assert rc == 0 and ex is not None


def test_dtype_order_first_bad_argument_wins():
    t = _retype(_retype(fresh(), "gradBias", pc.ACL_DOUBLE), "input", pc.ACL_INT8)
    expect(t, INVALID, "input has data type INT8")


@pytest.mark.parametrize("name", ["self", "input", "weight", "gradInput", "gradWeight"])
def test_ascend910_has_no_bf16(name):
    pc.set_soc_version("ascend910")
    expect(_retype(fresh(), name, pc.ACL_BF16), INVALID, name, "BF16", "ascend910")


def test_ascend910_bf16_bias_fails_at_grad_bias():
    # the real checker: bias may be BF16, but gradBias takes the chip's list {FLOAT, FLOAT16} and must equal
    # bias's dtype, so a BF16 bias fails at gradBias (rule 2)
    pc.set_soc_version("ascend910")
    dy, x, w, b = make_problem()
    t, _ = acl_problem(dy, x, w, b.astype(ml_dtypes.bfloat16))
    msg = expect(t, INVALID, "gradBias has data type BF16", "expected one of FLOAT, FLOAT16 on ascend910", cube=1)
    assert "bias has" not in msg.replace("gradBias has", "")


def test_ascend910_bf16_bias_with_fp32_grad_bias_fails_at_rule_7():
    pc.set_soc_version("ascend910")
    t = fresh()
    _retype(t, "bias", pc.ACL_BF16)
    expect(t, INVALID, "gradBias has data type FLOAT (0)", "expected bias's, BF16", cube=1)


def test_ascend910_bf16_bias_numpy_layer():
    dy, x, w, b = make_problem()
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(dy, x, w, b.astype(ml_dtypes.bfloat16), 1, cube_math_type=1, soc="ascend910")
    assert e.value.status == INVALID and "BF16" in e.value.message and "ascend910" in e.value.message


# ---- rule 3 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("fmt", [pc.ACL_FORMAT_NCHW, pc.ACL_FORMAT_NC1HWC0, pc.ACL_FORMAT_FRACTAL_NZ, 123])
def test_bad_format(name, fmt):
    t = fresh()
    o = t[name]
    t[name] = pc.aclCreateTensor(o.view_dims, o.data_type, o.strides, o.offset, fmt, o.storage_dims, o.data)
    expect(t, INVALID, name, "format", "expected ND or NCL")


def test_ncl_format_accepted_everywhere():
    t = fresh()
    for n in NAMES:
        o = t[n]
        t[n] = pc.aclCreateTensor(o.view_dims, o.data_type, o.strides, o.offset, pc.ACL_FORMAT_NCL,
                                  o.storage_dims, o.data)
    assert phase1(t)[0] == 0, pc.aclGetRecentErrMsg()


# ---- rule 4 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_bad_rank(name):
    t = fresh()
    o = t[name]
    n = o.numel
    dims = [n, 1] if len(o.view_dims) == 1 else [n]
    t[name] = pc.aclCreateTensor(dims, o.data_type, None, 0, o.format, [n], o.data)
    expect(t, INVALID, name, f"{len(dims)} dims", f"expected {len(o.view_dims)}")


# ---- rule 5 -------------------------------------------------------------------------------------
def test_cin_mismatch():
    dy, x, w, b = make_problem(Cin=3)
    t, _ = acl_problem(dy, x[:, :, :2].copy(), w, b)
    t["gradInput"], _ = device_tensor(np.zeros((6, 2, 2), np.float32))
    expect(t, INVALID, "input's third dim is 2", "weight's second dim is 3")


def test_bias_mismatch():
    dy, x, w, b = make_problem(Cout=4)
    t, _ = acl_problem(dy, x, w, b[:3].copy())
    expect(t, INVALID, "bias has shape [3]", "expected [4]")


@pytest.mark.parametrize("pad", [-1, 256, 10**6, 1.0, "1", None])
def test_bad_pad(pad):
    expect(fresh(), INVALID, f"pad is {pad!r}", "[0, 255]", pad=pad)


def test_pad_255_accepted():
    dy, x, w, b = make_problem(T_in=2, K=3, pad=255)
    t, _ = acl_problem(dy, x, w, b)
    assert phase1(t, pad=255)[0] == 0, pc.aclGetRecentErrMsg()


def test_negative_t_out():
    dy, x, w, b = make_problem(T_in=2, K=3, pad=0)  # T_out = 0: fine
    t, _ = acl_problem(dy, x, w, b)
    assert phase1(t, pad=0)[0] == 0
    z = np.zeros
    t, _ = acl_problem(z((0, 2, 4), np.float32), z((2, 2, 3), np.float32), z((5, 3, 4), np.float32),
                       z(4, np.float32))  # K = 5 > T_in + 1: T_out = -2
    expect(t, INVALID, "input has T_in = 2", "weight K = 5", "T_out", "= -2", "expected T_out >= 0", pad=0)


def test_self_shape():
    dy, x, w, b = make_problem()
    t, _ = acl_problem(dy[:-1].copy(), x, w, b)
    expect(t, INVALID, f"self has shape {[dy.shape[0] - 1, 2, 4]}", f"expected {list(dy.shape)}")


@pytest.mark.parametrize("name,src", [("gradInput", "input"), ("gradWeight", "weight"), ("gradBias", "bias")])
def test_output_shapes(name, src):
    t = fresh()
    o = t[name]
    dims = list(o.view_dims)
    dims[0] += 1
    t[name], _ = device_tensor(np.zeros(dims, np.float32))
    expect(t, INVALID, f"{name} has shape {dims}", f"expected {list(o.view_dims)}")


def test_negative_dim():
    t = fresh()
    o = t["gradBias"]
    t["gradBias"] = pc.aclCreateTensor([-4], o.data_type, [1], 0, o.format, [4], o.data)
    expect(t, INVALID, "gradBias has shape [-4] with a negative dim")


# ---- rule 6 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("cube", [-1, 4, 127, 1.5, None])
def test_bad_cube_math_type(cube):
    expect(fresh(), INVALID, f"cubeMathType is {cube!r}", "expected 0 (KEEP_DTYPE)", cube=cube)


@pytest.mark.parametrize("cube", [0, 3])
def test_ascend910_fp32_error_cells(cube):
    pc.set_soc_version("ascend910")
    expect(fresh(), INVALID, f"cubeMathType {cube}", "FLOAT", "ascend910", cube=cube)


@pytest.mark.parametrize("soc", ["ascend910b", "ascend950", "ascend910"])
@pytest.mark.parametrize("cube", [0, 1, 2, 3])
def test_fp16_every_cell_valid(soc, cube):
    pc.set_soc_version(soc)
    t, _ = acl_problem(*make_problem(dtype=np.float16))
    assert phase1(t, cube=cube)[0] == 0, pc.aclGetRecentErrMsg()


# ---- rule 7 -------------------------------------------------------------------------------------
def test_grad_input_dtype_must_match_input():
    t = _retype(fresh(), "gradInput", pc.ACL_FLOAT16)
    expect(t, INVALID, "gradInput has data type FLOAT16", "expected input's, FLOAT")


def test_grad_bias_dtype_must_match_bias():
    t = _retype(fresh(), "gradBias", pc.ACL_BF16)
    expect(t, INVALID, "gradBias has data type BF16", "expected bias's, FLOAT")


def test_grad_weight_dtype():
    t = _retype(fresh(), "gradWeight", pc.ACL_FLOAT16)
    expect(t, INVALID, "gradWeight has data type FLOAT16", "HIFLOAT8 or FLOAT8_E4M3FN")


def test_mixed_input_dtypes_are_promoted_not_rejected():
    dy, x, w, b = make_problem()
    t, _ = acl_problem(dy.astype(np.float16), x, w.astype(ml_dtypes.bfloat16), b)
    assert phase1(t)[0] == 0, pc.aclGetRecentErrMsg()


# ---- rule 8 -------------------------------------------------------------------------------------
def _redescribe(t, name, **kw):
    o = t[name]
    args = dict(view_dims=o.view_dims, data_type=o.data_type, strides=o.strides, offset=o.offset,
                format=o.format, storage_dims=o.storage_dims, tensor_data=o.data)
    args.update(kw)
    t[name] = pc.aclCreateTensor(**args)
    assert t[name] is not None
    return t


def test_view_outside_storage():
    t = fresh()
    expect(_redescribe(t, "input", offset=1), INVALID, "input", "inside its storage")


def test_storage_larger_than_buffer():
    t = fresh()
    n = t["weight"].numel
    expect(_redescribe(t, "weight", storage_dims=[n + 1]), INVALID, "weight", "device buffer")


def test_negative_stride_rejected():
    t = fresh()
    expect(_redescribe(t, "self", strides=[8, -4, 1], offset=4), INVALID, "self", "negative", "strides >= 0")


def test_negative_offset_rejected():
    expect(_redescribe(fresh(), "bias", offset=-1), INVALID, "bias", "offset -1")


def test_offset_past_the_storage_rejected():
    t = fresh()
    n = t["bias"].numel
    expect(_redescribe(t, "bias", offset=n + 1, storage_dims=[n]), INVALID, "bias", f"offset {n + 1} is past the end",
           f"expected an offset below {n}")


def test_int64_overflow_rejected():
    t = fresh()
    expect(_redescribe(t, "input", strides=[2**62, 1, 1]), INVALID, "input")


def test_freed_buffer_rejected():
    dy, x, w, b = make_problem()
    t, ptrs = acl_problem(dy, x, w, b)
    assert pc.aclrtFree(ptrs["weight"]) == 0
    expect(t, INVALID, "weight", "freed")


def test_no_buffer_rejected():
    expect(_redescribe(fresh(), "input", tensor_data=None), INVALID, "input", "no device buffer")


@pytest.mark.parametrize("name", ["gradInput", "gradWeight"])
def test_non_contiguous_output(name):
    t = fresh()
    o = t[name]
    d0, d1, d2 = o.view_dims
    t[name], _ = device_tensor(np.zeros((d0, d2, d1), np.float32), view=[d0, d1, d2], strides=[d1 * d2, 1, d1])
    expect(t, INVALID, name, "contiguous")


def test_outputs_overlapping_each_other():
    dy, x, w, b = make_problem()
    t, ptrs = acl_problem(dy, x, w, b)
    # gradBias on top of gradWeight's buffer
    t["gradBias"] = pc.aclCreateTensor([4], pc.ACL_FLOAT, [1], 0, pc.ACL_FORMAT_ND, [4], ptrs["gradWeight"])
    expect(t, INVALID, "gradBias", "overlaps gradWeight")


def test_output_overlapping_input():
    dy, x, w, b = make_problem()
    t, ptrs = acl_problem(dy, x, w, b)
    t["gradInput"] = pc.aclCreateTensor(list(x.shape), pc.ACL_FLOAT, None, 0, pc.ACL_FORMAT_ND, [x.size],
                                        ptrs["input"])
    expect(t, INVALID, "gradInput", "overlaps input")


def test_disjoint_views_of_one_buffer_accepted():
    dy, x, w, b = make_problem()
    t, ptrs = acl_problem(dy, x, w, b)
    rc, big = pc.aclrtMalloc(4 * (w.size + b.size))
    t["gradWeight"] = pc.aclCreateTensor(list(w.shape), pc.ACL_FLOAT, None, 0, pc.ACL_FORMAT_ND, [w.size], big)
    t["gradBias"] = pc.aclCreateTensor([4], pc.ACL_FLOAT, [1], 0, pc.ACL_FORMAT_ND, [4], big + 4 * w.size)
    assert phase1(t)[0] == 0, pc.aclGetRecentErrMsg()


# ---- the NumPy layer raises the same codes -------------------------------------------------------
def test_numpy_layer_codes_and_messages():
    dy, x, w, b = make_problem()
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(dy, None, w, b, 1)
    assert e.value.status == NULLPTR and "input" in e.value.message
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(dy, x.astype(np.float64), w, b, 1)
    # the NumPy layer names the NumPy dtype seen (and its aclDataType) and the NumPy dtypes expected
    assert e.value.status == INVALID and ("input has dtype float64 (aclDataType DOUBLE); expected float32, "
                                          "float16 or bfloat16") in e.value.message
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(dy, x, w, b, 256)
    assert e.value.status == INVALID and "pad is 256" in str(e.value)
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(dy, x, w, b, 1, grad_weight_dtype="int7")
    assert e.value.status == INVALID and "grad_weight_dtype is 'int7'" in e.value.message
    assert "gradWeight" not in e.value.message
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(dy, x, w, b, 1, grad_weight_dtype="float16")
    assert e.value.status == INVALID and "grad_weight_dtype is 'float16' (aclDataType FLOAT16)" in e.value.message
    # whichever rule refuses the keyword (2: not a gradWeight type at all; 7: not this weight's), the message
    # lists what this weight accepts
    for bad in ("int7", "float8_e5m2", "float64", "float16", np.float64):
        with pytest.raises(pc.AclnnError) as e:
            pc.conv_tbc_backward(dy, x, w, b, 1, grad_weight_dtype=bad)
        assert e.value.message.endswith("expected None or weight's dtype (float32), hifloat8 or float8_e4m3fn")
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward([[[1.0]]], x, w, b, 1)
    assert e.value.status == INVALID and "grad_output is a list; expected a NumPy array" in e.value.message
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(dy, x, w, b, 1, soc="ascend999")
    assert e.value.status == INVALID and "ascend999" in e.value.message
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(dy, x, w, b, 1, hf32_rounding="up")
    assert e.value.status == INVALID and "hf32_rounding is 'up'" in e.value.message
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(dy, x, w, b, 1, num_threads=0)
    assert e.value.status == INVALID and "num_threads" in e.value.message
    assert isinstance(e.value, ValueError)


def test_numpy_layer_matches_cann_message():
    dy, x, w, b = make_problem()
    t, _ = acl_problem(dy, x, w, b)
    rc, _, _ = phase1(t, pad=300)
    cann = pc.aclGetRecentErrMsg().split(": ", 1)[1]
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(dy, x, w, b, 300)
    assert e.value.status == rc and e.value.message.split(": ", 1)[1] == cann


def test_numpy_layer_error_is_the_threads_recent_message():
    """An AclnnError's message is also what aclGetRecentErrMsg() returns afterwards, as after a CANN failure."""
    dy, x, w, b = make_problem()
    t, _ = acl_problem(dy, x, w, b)
    phase1(t, pad=300)                                        # a CANN failure first: its message is replaced
    cases = ((pc.conv_tbc_backward, (dy, x, w, b, 1), {"accumulation": "nope"}),
             (pc.conv_tbc_backward, (dy, x, w, None, 1), {}),
             (pc.conv_tbc, (x, w, b, 999), {}),
             (pc.set_emulation_options, (), {"block_size": 0}))
    for fn, args, kwargs in cases:
        with pytest.raises(pc.AclnnError) as e:
            fn(*args, **kwargs)
        assert pc.aclGetRecentErrMsg() == e.value.message and str(e.value) == f"[{e.value.status}] {e.value.message}"


def test_misaligned_device_address_rejected():
    dy, x, w, b = make_problem()
    t, ptrs = acl_problem(dy, x, w, b)
    rc, big = pc.aclrtMalloc(4 * x.size + 2)
    t["gradInput"] = pc.aclCreateTensor(list(x.shape), pc.ACL_FLOAT, None, 0, pc.ACL_FORMAT_ND, [x.size], big + 2)
    expect(t, INVALID, "gradInput", "2 bytes into its allocation", "multiple of the element size (4 bytes)")


def test_numpy_layer_reads_misaligned_views():
    dy, x, w, b = make_problem()
    raw = np.zeros(x.nbytes + 1, np.uint8)
    mis = np.frombuffer(raw.data, dtype=np.float32, count=x.size, offset=1).reshape(x.shape)
    assert not mis.flags.aligned
    raw[1:] = x.view(np.uint8).ravel()
    got = pc.conv_tbc_backward(dy, mis, w, b, 1, deterministic=True)
    ref = pc.conv_tbc_backward(dy, x, w, b, 1, deterministic=True)
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)


def test_plan_cache_never_skips_a_rule():
    """Repeated calls reuse a plan; a call that differs in anything validation reads is validated afresh."""
    dy, x, w, b = make_problem()
    ref = pc.conv_tbc_backward(dy, x, w, b, 1)
    again = pc.conv_tbc_backward(dy, x, w, b, 1)          # from the cache
    for r, a in zip(ref, again):
        np.testing.assert_array_equal(r, a)
    for kwargs, pad in (({}, True), ({}, 1.0), ({}, 300), ({"cube_math_type": True}, 1),
                        ({"grad_weight_dtype": "float16"}, 1), ({"num_threads": 0}, 1), ({"soc": "nope"}, 1)):
        with pytest.raises(pc.AclnnError) as e:
            pc.conv_tbc_backward(dy, x, w, b, pad, **kwargs)
        assert e.value.status == INVALID
    with pytest.raises(pc.AclnnError):
        pc.conv_tbc_backward(dy[:-1], x, w, b, 1)             # another shape
    pc.set_soc_version("ascend910")                           # a process setting the key holds
    with pytest.raises(pc.AclnnError):
        pc.conv_tbc_backward(dy, x, w, b, 1)
    pc.set_soc_version("ascend910b")
    dy = np.full_like(dy, 1 + 2.0 ** -12)                     # an HF32 tie: the two roundings differ
    pc.set_emulation_options(hf32_rounding="nearest_even")
    gi = pc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=3)[0]
    pc.set_emulation_options(hf32_rounding="half_away")
    gi2 = pc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=3)[0]
    assert not np.array_equal(gi, gi2)


def test_plan_cache_follows_the_environment(monkeypatch):
    """The chip and thread count from the environment are part of a cached plan's key."""
    dy, x, w, b = make_problem()
    pc.conv_tbc_backward(dy, x, w, b, 1)                      # cached for ascend910b
    monkeypatch.setenv("PYCONVTBC_SOC_VERSION", "ascend910")  # FP32 KEEP_DTYPE is an error cell there
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(dy, x, w, b, 1)
    assert e.value.status == INVALID
    monkeypatch.setenv("PYCONVTBC_SOC_VERSION", "nope")
    with pytest.raises(pc.AclnnError):
        pc.conv_tbc_backward(dy, x, w, b, 1)
    monkeypatch.delenv("PYCONVTBC_SOC_VERSION")
    pc.conv_tbc_backward(dy, x, w, b, 1)
    monkeypatch.setenv("PYCONVTBC_NUM_THREADS", "0")
    with pytest.raises(pc.AclnnError):
        pc.conv_tbc_backward(dy, x, w, b, 1)


def test_numpy_layer_cube_math_type_message_uses_numpy_dtype_names():
    """The NumPy layer names data types as NumPy does; ascend910 has no KEEP_DTYPE for float32."""
    x = np.ones((3, 1, 2), np.float32)
    w = np.ones((1, 2, 2), np.float32)
    b = np.ones(2, np.float32)
    calls = [lambda: pc.conv_tbc_backward(np.ones((3, 1, 2), np.float32), x, w, b, 0, soc="ascend910"),
             lambda: pc.conv_tbc(x, w, b, 0, soc="ascend910")]
    for call in calls:
        with pytest.raises(pc.AclnnError) as e:
            call()
        assert e.value.status == 161002
        assert "cube_math_type 0 is not supported for float32 operands on ascend910" in str(e.value)
        assert "FLOAT (0)" not in str(e.value)


def test_unknown_profile_fails_before_the_tensor_rules(monkeypatch):
    """docs/semantics.md section 2: the chip profile is resolved before rule 1, so an unknown name is reported
    (161002, naming it) even when a tensor is also None; in both layers and both operators."""
    dy, x, w, b = make_problem()
    for call in (lambda: pc.conv_tbc_backward(None, x, w, b, 1, soc="bogus"),
                 lambda: pc.conv_tbc(None, w, b, 1, soc="bogus")):
        with pytest.raises(pc.AclnnError) as e:
            call()
        assert e.value.status == INVALID and "soc is 'bogus'" in str(e.value) and "ascend910b" in str(e.value)
    monkeypatch.setenv("PYCONVTBC_SOC_VERSION", "bogus")
    t = fresh()
    t["self"] = None
    expect(t, INVALID, "PYCONVTBC_SOC_VERSION", "bogus")


def test_cube_math_type_names_in_the_numpy_layer():
    """docs/numpy.md: cube_math_type takes 0-3, the constants or their names (any case) in both NumPy calls,
    with the same bits; anything else is 161002 naming the value and the names."""
    dy, x, w, b = make_problem()
    for name, value in (("USE_HF32", 3), ("use_fp16", 2), (" KEEP_DTYPE ", 0)):
        by_name = pc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=name, deterministic=True)
        by_value = pc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=value, deterministic=True)
        assert all(np.array_equal(p.view(np.uint32), q.view(np.uint32)) for p, q in zip(by_name, by_value))
        assert np.array_equal(pc.conv_tbc(x, w, b, 1, cube_math_type=name).view(np.uint32),
                              pc.conv_tbc(x, w, b, 1, cube_math_type=value).view(np.uint32))
    for call in (lambda v: pc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=v),
                 lambda v: pc.conv_tbc(x, w, b, 1, cube_math_type=v)):
        for bad in ("USE_HF33", "3", ""):
            with pytest.raises(pc.AclnnError) as e:
                call(bad)
            assert e.value.status == INVALID and f"cube_math_type is {bad!r}" in e.value.message
            assert "or one of those names" in e.value.message


def test_torch_tensor_in_the_numpy_layer_points_to_the_bridge():
    torch = pytest.importorskip("torch")
    dy, x, w, b = make_problem()
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(dy, torch.from_numpy(x), w, b, 1)
    assert e.value.status == INVALID
    assert "input is a Tensor; expected a NumPy array (a torch tensor: pass t.detach().numpy()" in e.value.message
    assert "pyconvtbc.torch.conv_tbc" in e.value.message
