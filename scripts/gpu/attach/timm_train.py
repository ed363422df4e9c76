# SPDX-License-Identifier: MIT
"""timm ResNet-50 training as its users write it: channels_last, bf16 autocast, SGD with momentum
(random weights: no network), batches of varying size."""
import timm
import torch

from common import Probe


def main():
    torch.manual_seed(0)
    p = Probe("timm_train")
    model = timm.create_model("resnet50", pretrained=False, num_classes=100)
    model = model.cuda().to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for step, batch in enumerate((32, 48, 32, 64, 32, 48)):
        g = torch.Generator(device="cuda").manual_seed(step)
        x = torch.randn(batch, 3, 224, 224, device="cuda", generator=g).to(memory_format=torch.channels_last)
        y = torch.randint(0, 100, (batch,), device="cuda", generator=g)
        p.step_begin()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)  # the forward line
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        p.step_end()
        if step == 3:
            p.sample("mid")
        losses.append(round(float(loss), 3))
    p.sample("end")
    p.finish(losses=losses)


if __name__ == "__main__":
    main()
