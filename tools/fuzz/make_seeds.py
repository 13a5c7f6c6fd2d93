#!/usr/bin/env python3
"""Writes the generated seeds of the fuzz corpora: deep nesting and large tensors for the request
codecs and config.pbtxt, small images for the decoders, hostile models for the loader.
Run from the repository root with the project's venv (onnx): .venv/bin/python tools/fuzz/make_seeds.py
The hand-written seeds next to them (request, response, config_full, ...) are kept as they are."""
import json
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def put(corpus, name, data):
    with open(os.path.join(HERE, corpus, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def request(data, shape, datatype="FP32", name="x"):
    return json.dumps({"id": "seed", "inputs": [{"name": name, "shape": shape, "datatype": datatype, "data": data}]})


def codec_seeds():
    # Nesting 1000 deep (libFuzzer grows it further; the decoder must bound it, not recurse).
    deep = "[" * 1000 + "1.5" + "]" * 1000
    put("corpus_json", "deep_nesting", '{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":' + deep + "}]}")
    put("corpus_json", "deep_objects", '{"parameters":' + '{"a":' * 1000 + "1" + "}" * 1000 + "}")
    # A large tensor: 65536 FP32 values (~450 KB of JSON), nested as [256][256].
    rows = [[round((r * 256 + c) * 0.001 - 30.0, 3) for c in range(256)] for r in range(256)]
    put("corpus_json", "large_fp32", request(rows, [256, 256]))
    put("corpus_json", "large_int64", request(list(range(-30000, 30000)), [60000], "INT64"))
    put("corpus_json", "bytes_tensor", request(["a", "", "\u00e9\u00e9", "x" * 300], [4], "BYTES"))
    put("corpus_json", "ranges", request([1e300, -1e300, 3.5e38, 65504.0, 1e-46], [5], "FP16"))
    # Binary extension: 4-byte header length, JSON header, then the blob.
    n = 65536
    header = json.dumps({"inputs": [{"name": "x", "shape": [n], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 4 * n}}],
                         "outputs": [{"name": "y", "parameters": {"binary_data": True}}]})
    blob = b"".join(struct.pack("<f", i * 0.25) for i in range(n))
    put("corpus_binary", "large_fp32", struct.pack("<I", len(header)) + header.encode() + blob)
    words = [b"ab", b"", b"\xff\xfe", b"z" * 100]
    blob = b"".join(struct.pack("<I", len(w)) + w for w in words)
    header = json.dumps({"inputs": [{"name": "s", "shape": [4], "datatype": "BYTES",
                                     "parameters": {"binary_data_size": len(blob)}}]})
    put("corpus_binary", "bytes_tensor", struct.pack("<I", len(header)) + header.encode() + blob)
    put("corpus_config", "deep_nesting", "name: \"m\"\n" + "parameters { key: \"k\" value: " * 300 + "{}" + " }" * 300)
    dims = ", ".join(str(d) for d in range(1, 2000))
    put("corpus_config", "long_dims", 'name: "m"\ninput [{ name: "x" data_type: TYPE_FP32 dims: [ ' + dims + " ] }]\n")


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(w, h, color_type, bit_depth, rows, palette=None):
    raw = b"".join(b"\x00" + r for r in rows)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 0))
    if palette:
        out += chunk(b"PLTE", palette)
    return out + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def image_seeds():
    # Byte 0 of each seed picks the pixel format (RGB/BGR/Grayscale); the rest is the file.
    w, h = 9, 7
    rgb_rows = [b"".join(bytes((x * 28 % 256, y * 36 % 256, (x + y) * 16 % 256)) for x in range(w)) for y in range(h)]
    put("corpus_image", "rgb.png", b"\x00" + png(w, h, 2, 8, rgb_rows))
    put("corpus_image", "grey.png", b"\x02" + png(w, h, 0, 8, [bytes(x * 20 for x in range(w)) for _ in range(h)]))
    put("corpus_image", "rgba.png", b"\x01" + png(3, 2, 6, 8, [bytes(range(12)), bytes(range(12, 24))]))
    put("corpus_image", "palette.png", b"\x00" + png(4, 2, 3, 8, [bytes((0, 1, 2, 1)), bytes((2, 1, 0, 0))],
                                                       palette=bytes((255, 0, 0, 0, 255, 0, 0, 0, 255))))
    row = 3 * 5
    pad = (4 - row % 4) % 4
    pixels = b"".join(bytes((x * 40, y * 60, 200)) for y in range(3) for x in range(5))
    body = b"".join(pixels[y * row:(y + 1) * row] + b"\x00" * pad for y in range(3))
    bmp = b"BM" + struct.pack("<IHHI", 54 + len(body), 0, 0, 54) + struct.pack("<IiiHHIIiiII", 40, 5, 3, 1, 24, 0,
                                                                                    len(body), 2835, 2835, 0, 0)
    put("corpus_image", "rgb.bmp", b"\x00" + bmp + body)
    put("corpus_image", "grey.pgm", b"\x00" + b"P5\n# seed\n4 3\n255\n" + bytes(range(0, 240, 20)))
    put("corpus_image", "rgb.ppm", b"\x01" + b"P6\n3 2\n255\n" + bytes(range(0, 180, 10)))


def model_seeds():
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper

    def save(name, nodes, inputs, outputs, inits=()):
        m = h.make_model(h.make_graph(nodes, name, inputs, outputs, list(inits)),
                         opset_imports=[h.make_opsetid("", 17)])
        m.ir_version = 8
        put("corpus_loader", name + ".onnx", m.SerializeToString())

    f = lambda n, s: h.make_tensor_value_info(n, T.FLOAT, s)
    i64 = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)
    save("regress_expand_2p40", [h.make_node("Expand", ["x", "s"], ["y"], name="big")], [f("x", [1])], [f("y", None)],
         [i64("s", [2**40, 2**40])])
    save("regress_constantofshape_2p50", [h.make_node("ConstantOfShape", ["s"], ["y"], name="big")], [],
         [f("y", None)], [i64("s", [2**50])])
    save("regress_batch_1e12", [h.make_node("Relu", ["x"], ["y"], name="relu")], [f("x", [10**12, 3])],
         [f("y", None)])
    save("seed_tile_pad_reshape",
         [h.make_node("Tile", ["x", "r"], ["t"], name="tile"),
          h.make_node("Pad", ["t", "p"], ["q"], name="pad"),
          h.make_node("Reshape", ["q", "s"], ["y"], name="reshape")],
         [f("x", [2, 3])], [f("y", None)], [i64("r", [2, 2]), i64("p", [1, 1, 1, 1]), i64("s", [-1])])
    save("seed_range_resize",
         [h.make_node("Range", ["a", "b", "c"], ["r"], name="range"),
          h.make_node("Resize", ["x", "", "sc"], ["y"], name="resize", mode="nearest")],
         [f("x", [1, 1, 2, 2])], [f("y", None), h.make_tensor_value_info("r", T.INT64, None)],
         [i64("a", 0), i64("b", 10), i64("c", 3), numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc")])


def http_seeds():
    # Request heads as clients send them, and the bytes that broke the server: a path that is
    # not UTF-8 on an unrouted path and a wrong method, raw high bytes, a long name.
    heads = {
        "get_live": b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n",
        "post_infer": b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                      b"Inference-Header-Content-Length: 12\r\n\r\n",
        "versions_query": b"GET /v2/models/m/versions/1?x=%C3%A9 HTTP/1.1\r\n\r\n",
        "bad_utf8_unrouted": b"GET /%FF HTTP/1.1\r\n\r\n",
        "bad_utf8_method": b"DELETE /v2/models/%C0%AF/infer HTTP/1.1\r\n\r\n",
        "raw_high_bytes": b"GET /v2/models/\xff\xfe/ready HTTP/1.1\r\nX: \xff\r\n\r\n",
        "shm_region": b"POST /v2/systemsharedmemory/region/%ED%A0%80/register HTTP/1.1\r\n\r\n",
        "long_name": b"GET /v2/models/" + b"a" * 3000 + b"/config HTTP/1.1\r\n\r\n",
        "bad_escape": b"GET /v2/models/%G1 HTTP/1.1\r\n\r\n",
    }
    for name, head in heads.items():
        put("corpus_http", name, head)


def grpc_seeds():
    # First byte: the message kind (fuzz_grpc_messages.cpp); then its wire bytes.
    from tritonclient.grpc import service_pb2 as pb
    r = pb.ModelInferRequest(model_name="m", id="1")
    i = r.inputs.add(name="x", datatype="FP32", shape=[1, 4])
    r.raw_input_contents.append(bytes(16))
    put("corpus_grpc", "infer_raw", b"\x00" + r.SerializeToString())
    r = pb.ModelInferRequest(model_name="m")
    i = r.inputs.add(name="x", datatype="INT64", shape=[2])
    i.contents.int64_contents.extend([1, -2])
    o = r.outputs.add(name="y")
    o.parameters["shared_memory_region"].string_param = "fuzz"
    o.parameters["shared_memory_byte_size"].int64_param = 64
    put("corpus_grpc", "infer_contents_shm_out", b"\x00" + r.SerializeToString())
    r = pb.ModelInferRequest(model_name="m")
    i = r.inputs.add(name="x", datatype="FP32", shape=[2, 2])
    i.parameters["shared_memory_region"].string_param = "fuzz"
    i.parameters["shared_memory_offset"].int64_param = 64
    i.parameters["shared_memory_byte_size"].int64_param = 16
    put("corpus_grpc", "infer_shm_in", b"\x00" + r.SerializeToString())
    r = pb.ModelInferRequest(model_name="m")
    i = r.inputs.add(name="s", datatype="BYTES", shape=[2])
    r.raw_input_contents.append(b"\x01\x00\x00\x00a\x02\x00\x00\x00bc")
    put("corpus_grpc", "infer_bytes", b"\x00" + r.SerializeToString())
    put("corpus_grpc", "infer_garbage", b"\x00\x0a\xff\xff\xff\xff\x0f")
    reg = pb.SystemSharedMemoryRegisterRequest(name="r", key="/k", offset=0, byte_size=64)
    put("corpus_grpc", "shm_register", b"\x01" + reg.SerializeToString())
    put("corpus_grpc", "shm_status", b"\x02" + pb.SystemSharedMemoryStatusRequest(name="fuzz").SerializeToString())
    put("corpus_grpc", "shm_unregister", b"\x03" + pb.SystemSharedMemoryUnregisterRequest(name="r").SerializeToString())
    cuda = pb.CudaSharedMemoryRegisterRequest(name="c", raw_handle=bytes(64), device_id=0, byte_size=64)
    put("corpus_grpc", "cuda_register", b"\x04" + cuda.SerializeToString())


codec_seeds()
image_seeds()
model_seeds()
http_seeds()
grpc_seeds()
