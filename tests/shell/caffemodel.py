"""Weights for tests/shell/caffemodel.sh: fresh random values for a LeNet-like net, written
as cdigits weights (docs/formats.md) and as Caffe .caffemodel files in both of Caffe's
layer formats, with message classes built from proto/caffe.proto (protoc-c's descriptor
set, through a descriptor pool), as Caffe's own protobuf code would write them.

usage: caffemodel.py DESCRIPTOR_SET OUT_DIR SEED"""
import random
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

desc_path, out, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
fds = descriptor_pb2.FileDescriptorSet()
fds.ParseFromString(open(desc_path, "rb").read())
pool = descriptor_pool.DescriptorPool()
for f in fds.file:
    pool.Add(f)


def cls(name):
    d = pool.FindMessageTypeByName(name)
    return (message_factory.GetMessageClass(d) if hasattr(message_factory, "GetMessageClass")
            else message_factory.MessageFactory(pool).GetPrototype(d))


NetParameter = cls("caffe.NetParameter")
rng = random.Random(seed)

# the network of caffemodel.sh: (layer, type, [blob shapes]), blob i is parameter "<layer>/<i>"
LAYERS = [
    ("conv1", "Convolution", [(4, 1, 3, 3), (4,)]),
    ("pool1", "Pooling", []),
    ("conv2", "Convolution", [(6, 4, 3, 3), (6,)]),
    ("ip1", "InnerProduct", [(8, 150), (8,)]),
    ("relu1", "ReLU", []),
    ("ip2", "InnerProduct", [(3, 8), (3,)]),
    ("prob", "Softmax", []),
]


def count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def std(name, i, s):
    """spread of the values: 1/sqrt(fan-in) for weights (conv1 also over pixels of 0..255),
    so the answer is not one class at 100%"""
    if i:
        return 0.1
    return (1 / 255 if name == "conv1" else 1) * 2 / (count(s) // s[0]) ** 0.5


# float32 values, so that every format holds exactly the same numbers
values = {(name, i): [struct.unpack("<f", struct.pack("<f", rng.gauss(0, std(name, i, s))))[0] for _ in range(count(s))]
          for name, _, shapes in LAYERS for i, s in enumerate(shapes)}


def cdw(path):
    body = b"CDW1" + struct.pack("<II", 1, len(values))
    for name, _, shapes in LAYERS:
        for i, s in enumerate(shapes):
            pname = ("%s/%d" % (name, i)).encode()
            dims = list(s) + [0] * (4 - len(s))
            body += struct.pack("<I", len(pname)) + pname + struct.pack("<5I", len(s), *dims)
            body += struct.pack("<Q", count(s)) + struct.pack("<%df" % count(s), *values[(name, i)])
    h = 1469598103934665603
    for b in body:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    open(path, "wb").write(body + struct.pack("<Q", h))


def legacy4(s):
    return (1,) * (4 - len(s)) + tuple(s)


def caffemodel(path, legacy=False, shape_of=None, drop=(), extra=True):
    """legacy: V1 layers with num/channels/height/width; shape_of: (layer, blob) -> shape to
    write instead; drop: layers left out; extra: add layers the network does not have."""
    net = NetParameter()
    net.name = "LeNetLike"
    rows = list(LAYERS)
    if extra:
        rows = [("data", "Data", []), ("scale_extra", "Scale", [(1, 16, 16)])] + rows + [("loss", "SoftmaxWithLoss", [])]
    for name, typ, shapes in rows:
        if name in drop:
            continue
        if legacy:
            layer = net.layers.add()
        else:
            layer = net.layer.add()
            layer.type = typ
        layer.name = name
        for i, s in enumerate(shapes):
            blob = layer.blobs.add()
            s = (shape_of or {}).get((name, i), s)
            if legacy:
                blob.num, blob.channels, blob.height, blob.width = legacy4(s)
            else:
                blob.shape.dim.extend(s)
            blob.data.extend(values.get((name, i)) or [rng.uniform(-1, 1) for _ in range(count(s))])
    open(path, "wb").write(net.SerializeToString())


cdw(out + "/weights.cdw")
caffemodel(out + "/current.caffemodel")
caffemodel(out + "/legacy.caffemodel", legacy=True)
caffemodel(out + "/no_conv2.caffemodel", drop=("conv2",))
caffemodel(out + "/bad_shape.caffemodel", shape_of={("ip1", 0): (8, 151)})
caffemodel(out + "/bad_legacy.caffemodel", legacy=True, shape_of={("conv2", 0): (6, 4, 5, 5)})
