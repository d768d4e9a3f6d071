#!/usr/bin/env python3
"""Writes the seed inputs of fuzz_checkpoint_reader into fuzz/corpus_checkpoint/ (stdlib only, no torch):
a tiny safetensors checkpoint laid out as parla writes them, the same weights as a TorchScript archive laid out
as LibTorch's OutputArchive writes them (zip entries archive/data.pkl, archive/code/..., archive/data/<key>,
archive/version), that archive's data.pkl alone, and an archive whose code defines __setstate__. The two .npz
seeds (tiny-marian.npz stored, tiny-marian-deflated.npz compressed) were written once with numpy.savez and
numpy.savez_compressed; they are not regenerated here, to keep this script free of numpy."""
import json
import os
import struct
import zipfile

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_checkpoint")
META = json.dumps({"config": {"model": {"type": "transformer", "d_model": 2}}, "src_vocab_size": 3,
                   "tgt_vocab_size": 3, "info": {}})
W = struct.pack("<6f", 0.5, -1, 2, 0.25, 3, -0.125)
B = struct.pack("<3f", 1, 2, 3)


def safetensors():
    header = {"__metadata__": {"format": "pt", "parla_format": "2", "parla_meta": META},
              "model.b": {"dtype": "F32", "shape": [3], "data_offsets": [24, 36]},
              "model.w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
              "parla_src_spm": {"dtype": "U8", "shape": [0], "data_offsets": [36, 36]}}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + W + B


def s(text):  # BINUNICODE
    data = text.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def tensor(key, numel, sizes, strides):
    pid = b"(" + s("storage") + b"ctorch\nFloatStorage\n" + s(key) + s("cpu") + b"J" + struct.pack("<i", numel) + b"tQ"
    ints = lambda v: b"(" + b"".join(b"K" + bytes([x]) for x in v) + b"t"
    return (b"ctorch._utils\n_rebuild_tensor_v2\n(" + pid + b"K\x00" + ints(sizes) + ints(strides) + b"\x89" +
            b"ccollections\nOrderedDict\n)RtR")


def module(name, items):
    return b"c__torch__" + name.encode() + b"\nModule\n)\x81}(" + items + b"ub"


def data_pkl():
    model = module(".___torch_mangle_0", s("w") + tensor("0", 6, [2, 3], [3, 1]) + s("b") + tensor("1", 3, [3], [1]))
    return b"\x80\x02" + module("", s("parla_format") + b"K\x01" + s("parla_meta") + s(META) + s("model") + model) + b"."


def archive(code_extra=""):
    path = os.path.join(OUT, "tmp.zip")
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", data_pkl())
        z.writestr("archive/code/__torch__.py", "class Module(Module):\n  parla_format : int\n" + code_extra,
                   compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("archive/data/0", W)
        z.writestr("archive/data/1", B)
        z.writestr("archive/version", "3\n")
        z.writestr("archive/byteorder", "little")
    with open(path, "rb") as f:
        data = f.read()
    os.remove(path)
    return data


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {"tiny.safetensors": safetensors(), "tiny-legacy.pt": archive(), "data.pkl": data_pkl(),
             "setstate-legacy.pt": archive("  def __setstate__(self, state: Tuple[int]) -> None:\n    pass\n")}
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
