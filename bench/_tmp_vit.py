import os, sys, time, statistics
import numpy as np, onnx, torch, torchvision
from vkml.benchmarks import models as M
out = os.environ["OUT"]
torch.manual_seed(0)
net = torchvision.models.VisionTransformer(image_size=64, patch_size=16, num_layers=2, num_heads=3, hidden_dim=192, mlp_dim=768).eval()
x = torch.randn(1, 3, 64, 64)
proto = M._onnx_export(torch, net, (x,), ["x"])
onnx.save(proto, f"{out}/vit_tiny.onnx")
np.save(f"{out}/vit_tiny_x.npy", x.numpy())
with torch.no_grad():
    np.save(f"{out}/vit_tiny_y.npy", net(x).numpy())
bm, why = M.torch_transformer("vit_b_16")
print(why)
onnx.save(bm.proto, "/tmp/vit_b_16.onnx")
np.save("/tmp/vit_x.npy", bm.feed["x"])
