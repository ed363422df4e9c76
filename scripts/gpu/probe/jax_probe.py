# One-off: what XLA_PYTHON_CLIENT_ALLOCATOR / PREALLOCATE change in a JAX program (no preload).
import json, subprocess, sys, time
import jax, jax.numpy as jnp
key = jax.random.PRNGKey(0)
W = [jax.random.normal(key, (4096, 4096), dtype=jnp.bfloat16) for _ in range(8)]
@jax.jit
def step(W, x):
    def loss(W):
        h = x
        for w in W:
            h = jnp.tanh(h @ w)
        return (h.astype(jnp.float32) ** 2).mean()
    l, g = jax.value_and_grad(loss)(W)
    return [w - 1e-3 * gi for w, gi in zip(W, g)], l
x = jax.random.normal(key, (8192, 4096), dtype=jnp.bfloat16)
W, l = step(W, x); l.block_until_ready()
t = []
for i in range(30):
    t0 = time.perf_counter(); W, l = step(W, x); l.block_until_ready(); t.append(time.perf_counter() - t0)
used = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout.strip()
print(json.dumps({"mode": sys.argv[1], "loss": float(l), "step_ms_median": sorted(t)[15] * 1e3,
                  "nvidia_smi_used_mib": used, "memory_stats": jax.devices()[0].memory_stats()}))
