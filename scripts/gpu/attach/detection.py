# SPDX-License-Identifier: MIT
"""torchvision detection training with varying image sizes (Faster R-CNN, random weights)."""
import torch
import torchvision

from common import Probe


def main():
    torch.manual_seed(0)
    p = Probe("detection")
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_fpn(weights=None, weights_backbone=None,
                                                                             num_classes=5).cuda().train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    sizes = [(480, 640), (512, 512), (600, 800), (384, 704), (640, 480), (512, 768)]
    losses = []
    for i, (h, w) in enumerate(sizes):
        g = torch.Generator(device="cuda").manual_seed(i)
        imgs = [torch.rand(3, h, w, device="cuda", generator=g) for _ in range(2)]
        targets = [{"boxes": torch.tensor([[10.0, 20.0, 100.0, 200.0]], device="cuda"),
                    "labels": torch.tensor([1], device="cuda")} for _ in range(2)]
        p.step_begin()
        loss = sum(model(imgs, targets).values())  # the forward line
        if i == 3:
            p.sample("mid")
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        p.step_end()
        losses.append(round(float(loss), 3))
    p.sample("end")
    p.finish(losses=losses)


if __name__ == "__main__":
    main()
