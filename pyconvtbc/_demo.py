"""The operators' C++ examples, ported line by line to the Python CANN layer.

``python -m pyconvtbc demo`` runs the backward's (the operator document's example) and then the same problem
through the NumPy call, then the forward's (Huawei's ``test_aclnn_conv_tbc.cpp`` for aclnnConvTbc) and the same
problem through ``conv_tbc``.  Each C step is kept, in order, with the C names; out-parameters come back as
tuples; CHECK_RET returns the status.
"""
import numpy as np

from . import (ACL_FLOAT, ACL_FORMAT_NCL, ACL_FORMAT_ND, ACL_FORMAT_NCHW, ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_DEVICE_TO_HOST,
               ACL_MEMCPY_HOST_TO_DEVICE, ACL_SUCCESS, aclCreateTensor, aclDestroyTensor, aclFinalize, aclInit,
               aclnnConvTbcBackward, aclnnConvTbcBackwardGetWorkspaceSize, aclrtCreateStream, aclrtDestroyStream,
               aclrtFree, aclrtMalloc, aclrtMemcpy, aclrtResetDevice, aclrtSetDevice, aclrtSynchronizeStream,
               aclnnConvTbc, aclnnConvTbcGetWorkspaceSize, conv_tbc, conv_tbc_backward)


def LOG_PRINT(message, *args, out=print):
    out(message % args if args else message, end="")


def GetShapeSize(shape):
    shapeSize = 1
    for i in shape:
        shapeSize *= i
    return shapeSize


def Init(deviceId):
    ret = aclInit(None)
    if ret != ACL_SUCCESS:
        LOG_PRINT("aclInit failed. ERROR: %d\n", ret)
        return ret, None
    ret = aclrtSetDevice(deviceId)
    if ret != ACL_SUCCESS:
        LOG_PRINT("aclrtSetDevice failed. ERROR: %d\n", ret)
        return ret, None
    ret, stream = aclrtCreateStream()
    if ret != ACL_SUCCESS:
        LOG_PRINT("aclrtCreateStream failed. ERROR: %d\n", ret)
        return ret, None
    return 0, stream


def CreateAclTensor(hostData, shape, dataType, dataFormat=None):
    """Returns (ret, deviceAddr, tensor).  dataFormat None: NCHW for 4-D shapes, else ND (the backward's
    example); the forward's example passes it."""
    size = GetShapeSize(shape) * hostData.itemsize
    ret, deviceAddr = aclrtMalloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    if ret != ACL_SUCCESS:
        LOG_PRINT("aclrtMalloc failed. ERROR: %d\n", ret)
        return ret, None, None
    ret = aclrtMemcpy(deviceAddr, size, hostData, size, ACL_MEMCPY_HOST_TO_DEVICE)
    if ret != ACL_SUCCESS:
        LOG_PRINT("aclrtMemcpy failed. ERROR: %d\n", ret)
        return ret, deviceAddr, None
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = shape[i + 1] * strides[i + 1]
    fmt = dataFormat if dataFormat is not None else ACL_FORMAT_NCHW if len(shape) == 4 else ACL_FORMAT_ND
    tensor = aclCreateTensor(shape, dataType, strides, 0, fmt, shape, deviceAddr)
    return 0, deviceAddr, tensor


def Finalize(deviceId, stream):
    aclrtDestroyStream(stream)
    aclrtResetDevice(deviceId)
    aclFinalize()


def aclnnConvTbcBackwardTest(deviceId, results=None):
    """The C function of the same name.  Fills ``results`` (a dict) with the three host arrays."""
    results = {} if results is None else results
    ret, stream = Init(deviceId)
    if ret != ACL_SUCCESS:
        LOG_PRINT("Init acl failed. ERROR: %d\n", ret)
        return ret, stream
    selfShape, inputShape, weightShape, biasShape = [5, 1, 2], [5, 1, 2], [1, 2, 2], [2]
    pad = 0
    cubeMathType = 1
    gradInputShape, gradWeightShape, gradBiasShape = [5, 1, 2], [1, 2, 2], [2]

    owned = []  # (tensor, deviceAddr): the C code's unique_ptr deleters

    def make(shape):
        data = np.ones(GetShapeSize(shape), dtype=np.float32)
        r, addr, t = CreateAclTensor(data, shape, ACL_FLOAT)
        owned.append((t, addr))
        return r, addr, t

    try:
        ret, selfDeviceAddr, self_ = make(selfShape)
        if ret != ACL_SUCCESS:
            return ret, stream
        ret, inputDeviceAddr, input_ = make(inputShape)
        if ret != ACL_SUCCESS:
            return ret, stream
        ret, weightDeviceAddr, weight = make(weightShape)
        if ret != ACL_SUCCESS:
            return ret, stream
        ret, biasDeviceAddr, bias = make(biasShape)
        if ret != ACL_SUCCESS:
            return ret, stream
        ret, gradInputDeviceAddr, gradInput = make(inputShape)
        if ret != ACL_SUCCESS:
            return ret, stream
        ret, gradWeightDeviceAddr, gradWeight = make(weightShape)
        if ret != ACL_SUCCESS:
            return ret, stream
        ret, gradBiasDeviceAddr, gradBias = make(gradBiasShape)
        if ret != ACL_SUCCESS:
            return ret, stream

        # 3. Call the CANN operator library API.
        ret, workspaceSize, executor = aclnnConvTbcBackwardGetWorkspaceSize(
            self_, input_, weight, bias, pad, cubeMathType, gradInput, gradWeight, gradBias)
        if ret != ACL_SUCCESS:
            LOG_PRINT("aclnnConvTbcBackwardGetWorkspaceSize failed. ERROR: %d\n", ret)
            return ret, stream
        workspaceAddr = None
        if workspaceSize > 0:
            ret, workspaceAddr = aclrtMalloc(workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST)
            if ret != ACL_SUCCESS:
                LOG_PRINT("allocate workspace failed. ERROR: %d\n", ret)
                return ret, stream
            owned.append((None, workspaceAddr))
        ret = aclnnConvTbcBackward(workspaceAddr, workspaceSize, executor, stream)
        if ret != ACL_SUCCESS:
            LOG_PRINT("aclnnConvTbcBackward failed. ERROR: %d\n", ret)
            return ret, stream
        # 4. Synchronously wait for task execution to complete.
        ret = aclrtSynchronizeStream(stream)
        if ret != ACL_SUCCESS:
            LOG_PRINT("aclrtSynchronizeStream failed. ERROR: %d\n", ret)
            return ret, stream
        # 5. Copy the results from device memory to host memory and print them.
        for name, shape, addr in (("gradInput", gradInputShape, gradInputDeviceAddr),
                                  ("gradWeight", gradWeightShape, gradWeightDeviceAddr),
                                  ("gradBias", gradBiasShape, gradBiasDeviceAddr)):
            size = GetShapeSize(shape)
            result = np.zeros(size, dtype=np.float32)
            ret = aclrtMemcpy(result, result.nbytes, addr, size * result.itemsize, ACL_MEMCPY_DEVICE_TO_HOST)
            if ret != ACL_SUCCESS:
                LOG_PRINT("copy result from device to host failed. ERROR: %d\n", ret)
                return ret, stream
            for i in range(size):
                LOG_PRINT("%sResult[%d] is: %f\n", name, i, result[i])
            results[name] = result.reshape(shape)
        return ACL_SUCCESS, stream
    finally:
        for t, addr in reversed(owned):
            if t is not None:
                aclDestroyTensor(t)
            if addr is not None:
                aclrtFree(addr)


def main_cann():
    """The C ``main``: returns the exit status."""
    deviceId = 0
    ret, stream = aclnnConvTbcBackwardTest(deviceId)
    if ret != ACL_SUCCESS:
        LOG_PRINT("aclnnConvTbcBackwardTest failed. ERROR: %d\n", ret)
        if stream is not None:
            Finalize(deviceId, stream)
        return ret
    Finalize(deviceId, stream)
    return 0


def main_numpy():
    """The same problem through the NumPy call."""
    ones = np.ones
    gi, gw, gb = conv_tbc_backward(ones((5, 1, 2), np.float32), ones((5, 1, 2), np.float32),
                                   ones((1, 2, 2), np.float32), ones(2, np.float32), pad=0, cube_math_type=1)
    np.set_printoptions(precision=6, floatmode="fixed")
    print("gradInput  =", gi.ravel())
    print("gradWeight =", gw.ravel())
    print("gradBias   =", gb.ravel())
    return 0


def aclnnConvTbcTest(deviceId, results=None):
    """The forward's C function of the same name (Huawei's example for aclnnConvTbc): every input is ones,
    pad 1, cubeMathType 1; each of the 16 outputs is 1 (the bias) + 2 taps x 3 channels = 7.  Fills
    ``results["result"]`` with all 16 values (the C code prints the first 10)."""
    results = {} if results is None else results
    ret, stream = Init(deviceId)
    if ret != ACL_SUCCESS:
        LOG_PRINT("Init acl failed. ERROR: %d\n", ret)
        return ret, stream
    # 2. Build the inputs and outputs.
    shapeInput = [2, 2, 3]
    shapeWeight = [3, 3, 4]
    shapeBias = [4]
    shapeResult = [2, 2, 4]
    inputData = np.ones(GetShapeSize(shapeInput), dtype=np.float32)
    weightData = np.ones(GetShapeSize(shapeWeight), dtype=np.float32)
    biasData = np.ones(GetShapeSize(shapeBias), dtype=np.float32)
    outputData = np.ones(GetShapeSize(shapeResult), dtype=np.float32)
    owned = []  # (tensor, deviceAddr): the C code's unique_ptr deleters
    try:
        ret, deviceDataA, input_ = CreateAclTensor(inputData, shapeInput, ACL_FLOAT, ACL_FORMAT_NCL)
        owned.append((input_, deviceDataA))
        if ret != ACL_SUCCESS:
            return ret, stream
        ret, deviceDataB, weight = CreateAclTensor(weightData, shapeWeight, ACL_FLOAT, ACL_FORMAT_NCL)
        owned.append((weight, deviceDataB))
        if ret != ACL_SUCCESS:
            return ret, stream
        ret, deviceDataC, bias = CreateAclTensor(biasData, shapeBias, ACL_FLOAT, ACL_FORMAT_ND)
        owned.append((bias, deviceDataC))
        if ret != ACL_SUCCESS:
            return ret, stream
        ret, deviceDataResult, result = CreateAclTensor(outputData, shapeResult, ACL_FLOAT, ACL_FORMAT_NCL)
        owned.append((result, deviceDataResult))
        if ret != ACL_SUCCESS:
            return ret, stream
        # 3. Call the CANN operator library API.
        ret, workspaceSize, executor = aclnnConvTbcGetWorkspaceSize(input_, weight, bias, 1, result, 1)
        if ret != ACL_SUCCESS:
            LOG_PRINT("aclnnConvTbcGetWorkspaceSize failed. ERROR: %d\n", ret)
            return ret, stream
        workspaceAddr = None
        if workspaceSize > 0:
            ret, workspaceAddr = aclrtMalloc(workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST)
            if ret != ACL_SUCCESS:
                LOG_PRINT("allocate workspace failed. ERROR: %d\n", ret)
                return ret, stream
            owned.append((None, workspaceAddr))
        ret = aclnnConvTbc(workspaceAddr, workspaceSize, executor, stream)
        if ret != ACL_SUCCESS:
            LOG_PRINT("aclnnConvTbc failed. ERROR: %d\n", ret)
            return ret, stream
        # 4. Synchronously wait for task execution to complete.
        ret = aclrtSynchronizeStream(stream)
        if ret != ACL_SUCCESS:
            LOG_PRINT("aclrtSynchronizeStream failed. ERROR: %d\n", ret)
            return ret, stream
        # 5. Copy the result from device memory to host memory and print it.
        size = GetShapeSize(shapeResult)
        resultData = np.zeros(size, dtype=np.float32)
        ret = aclrtMemcpy(resultData, resultData.nbytes, deviceDataResult, size * resultData.itemsize,
                          ACL_MEMCPY_DEVICE_TO_HOST)
        if ret != ACL_SUCCESS:
            LOG_PRINT("copy result from device to host failed. ERROR: %d\n", ret)
            return ret, stream
        printSize = 10 if size > 10 else size
        for i in range(printSize):
            LOG_PRINT("result[%d] is: %f\n", i, resultData[i])
        results["result"] = resultData.reshape(shapeResult)
        return ACL_SUCCESS, stream
    finally:
        for t, addr in reversed(owned):
            if t is not None:
                aclDestroyTensor(t)
            if addr is not None:
                aclrtFree(addr)


def main_cann_forward():
    """The forward example's C ``main``: returns the exit status."""
    deviceId = 0
    ret, stream = aclnnConvTbcTest(deviceId)
    if ret != ACL_SUCCESS:
        LOG_PRINT("aclnnConvTbcTest failed. ERROR: %d\n", ret)
        if stream is not None:
            Finalize(deviceId, stream)
        return ret
    Finalize(deviceId, stream)
    return 0


def main_numpy_forward():
    """The forward example's problem through the NumPy call."""
    ones = np.ones
    out = conv_tbc(ones((2, 2, 3), np.float32), ones((3, 3, 4), np.float32), ones(4, np.float32), pad=1,
                   cube_math_type=1)
    np.set_printoptions(precision=6, floatmode="fixed")
    print("out =", out.ravel())
    return 0


def demo():
    print("== The document's example through the CANN layer (aclnnConvTbcBackward, cubeMathType=1) ==")
    rc = main_cann()
    if rc:
        return rc
    print("\n== The same problem through the NumPy layer (pyconvtbc.conv_tbc_backward) ==")
    rc = main_numpy()
    if rc:
        return rc
    print("\n== The forward's example through the CANN layer (aclnnConvTbc, pad=1, cubeMathType=1) ==")
    rc = main_cann_forward()
    if rc:
        return rc
    print("\n== The same problem through the NumPy layer (pyconvtbc.conv_tbc) ==")
    return main_numpy_forward()
