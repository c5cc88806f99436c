"""The exact float64 gradients of conv_tbc that every study measures against."""
from __future__ import annotations

import numpy as np


def reference_gradients(grad_output, input, weight, pad=0):
    """float64 (gradInput, gradWeight, gradBias) of conv_tbc, straight from the formulas of docs/semantics.md,
    section 1."""
    dy = np.asarray(grad_output, dtype=np.float64)
    x = np.asarray(input, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)
    T, B, Cin = x.shape
    K, _, Cout = w.shape
    T_out = dy.shape[0]
    gi = np.zeros((T, B, Cin))
    gw = np.zeros((K, Cin, Cout))
    for k in range(K):
        # dy index s = t + pad - k  <->  x index t = s + k - pad; both in range
        s0, s1 = max(0, pad - k), min(T_out, T + pad - k)
        if s1 <= s0:
            continue
        t0, t1 = s0 + k - pad, s1 + k - pad
        d = dy[s0:s1].reshape(-1, Cout)
        xv = x[t0:t1].reshape(-1, Cin)
        gi[t0:t1] += (d @ w[k].T).reshape(t1 - t0, B, Cin)
        gw[k] = xv.T @ d
    gb = dy.reshape(-1, Cout).sum(axis=0)
    return gi, gw, gb


def reference_forward(input, weight, bias, pad=0):
    """float64 output of conv_tbc's forward: out[t,b,co] = bias[co] + sum_k sum_ci input[t+k-pad,b,ci] *
    weight[k,ci,co], input zero outside [0, T)."""
    x = np.asarray(input, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)
    b = np.asarray(bias, dtype=np.float64)
    T, B, Cin = x.shape
    K, _, Cout = w.shape
    T_out = T + 2 * pad - K + 1
    out = np.broadcast_to(b, (max(T_out, 0), B, Cout)).copy()
    for k in range(K):
        s0, s1 = max(0, pad - k), min(T_out, T + pad - k)      # out index s reads input s + k - pad
        if s1 <= s0:
            continue
        out[s0:s1] += (x[s0 + k - pad:s1 + k - pad].reshape(-1, Cin) @ w[k]).reshape(s1 - s0, B, Cout)
    return out
