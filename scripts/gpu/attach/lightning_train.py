# SPDX-License-Identifier: MIT
"""A Lightning Trainer fitting a small transformer classifier: bf16-mixed precision, AdamW, and a
DataLoader with two worker processes forked from the CUDA process (they never touch the GPU)."""
import tempfile

import torch

try:
    import lightning.pytorch as pl
except ImportError:  # the older package name
    import pytorch_lightning as pl

from common import Probe


class Classifier(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(64, 256)
        self.encoder = torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(256, 8, 1024, batch_first=True, dropout=0.0), num_layers=4)
        self.head = torch.nn.Linear(256, 10)
        self.losses = []

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(dim=1))  # the forward line

    def training_step(self, batch, idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self(x), y)
        self.losses.append(loss.detach())
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


class Timing(pl.Callback):
    def __init__(self, probe):
        self.p = probe

    def on_train_batch_start(self, trainer, module, batch, idx):
        self.p.step_begin()

    def on_train_batch_end(self, trainer, module, outputs, batch, idx):
        self.p.step_end()
        if idx == 5:
            self.p.sample("mid")


def main():
    pl.seed_everything(0, workers=True)
    p = Probe("lightning_train")
    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(1024, 128, 64, generator=g), torch.randint(0, 10, (1024,), generator=g))
    loader = torch.utils.data.DataLoader(data, batch_size=64, shuffle=True, num_workers=2,
                                         generator=torch.Generator().manual_seed(1))
    model = Classifier()
    trainer = pl.Trainer(accelerator="gpu", devices=1, max_steps=12, precision="bf16-mixed", logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         default_root_dir=tempfile.mkdtemp(prefix="lightning-"), callbacks=[Timing(p)])
    trainer.fit(model, loader)  # the fit line
    p.sample("end")
    p.finish(losses=[round(float(v), 3) for v in model.losses], steps=trainer.global_step)


if __name__ == "__main__":
    main()
