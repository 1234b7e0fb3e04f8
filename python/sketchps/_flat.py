"""The model's two flat buffers and the gradient hooks, in Python, so that sketchps._core needs no torch
(it receives the buffers' addresses). The contract of worker/flat_model.h, kept for any torch version:

- FlatModel(named, buffer_names) copies the trainable parameters (name, tensor) in this order into ONE
  contiguous float32 parameter buffer on their device and re-points each parameter's .data at its
  slice; each .grad becomes a view into ONE zeroed flat gradient buffer. Nothing is copied per round.
- zero_grad() zeroes the gradient buffer and re-points any .grad that no longer aliases its slice
  (set to None by a zero_grad(set_to_none=True) of the model or the torch optimizer, or replaced): the
  gradients are zero then, so the views are restored exactly.
- verify() (before every round) raises OrderError naming the parameter whose .data or .grad no
  longer aliases the buffers (a .grad set to None, a parameter re-assigned or moved).
- Refused (ConfigError naming the parameter): no parameters, a parameter that is not a dense float32
  tensor, on another device than the first, with requires_grad False, empty, or registered twice; a
  CUDA parameter on a device other than cuda:0 (the core's threads use the current CUDA device 0:
  give each rank its GPU with CUDA_VISIBLE_DEVICES).
- The buffers live on the parameters' device, which must be the loaded kernels' (sketchps._kernels):
  ConfigError naming both and SKETCHPS_KERNELS otherwise.

GradientHooks registers a hook on each parameter's gradient accumulator (the AccumulateGrad node, as
DDP's reducer and Horovod do; `p.expand_as(p).grad_fn.next_functions[0][0]` on torch 1.13 and 2.x)
that tells the worker the parameter's gradient is complete (Worker.gradient_accumulated): with
overlap each shard's exchange starts during backward (session/shard_readiness.h).

CUDA: the core's kernels run on the legacy default stream. Before the core reads a gradient
(torch_work_done: in the hooks and before a round), torch's current stream is synchronized when it
is not the default one (also before the core's last record: finish, and the failure report); the
core synchronizes its own work before step returns.
"""
import torch

from sketchps import _core
from sketchps.errors import ConfigError, OrderError


def torch_work_done(device):
    """Waits for torch's queued work on `device` when it runs on a stream other than the default
    (legacy) one, which the core's kernels follow in order anyway. Nothing on the CPU."""
    if device.type == "cuda":
        stream = torch.cuda.current_stream(device)
        if stream.cuda_stream != torch.cuda.default_stream(device).cuda_stream:
            stream.synchronize()


def _check_parameter(name, p, device):
    def fail(why):
        raise ConfigError(f"model: parameter '{name}' {why}")
    if p.layout != torch.strided:
        fail("is not a dense tensor")
    if p.dtype != torch.float32:
        fail(f"has dtype {str(p.dtype).replace('torch.', '')}, expected float32")
    if not p.requires_grad:
        fail("has requires_grad == false (frozen parameters are not supported)")
    if p.numel() == 0:
        fail("is empty")
    if p.device != device:
        fail(f"is on {p.device}, the model's first parameter on {device} (one device per rank)")


def _check_device(device):
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"model: its parameters are on {device}; sketchps runs on cpu or cuda")
    if device.type == "cuda" and (device.index or 0) != 0:
        raise ConfigError(f"model: its parameters are on {device}; the sketchps core runs on cuda:0 (give each rank "
                          "its GPU with CUDA_VISIBLE_DEVICES, so that it is cuda:0)")
    loaded = _core.kernels_backend()
    if device.type != loaded:
        raise ConfigError(f"model: its parameters are on {device.type}, but sketchps loaded the {loaded} kernels "
                          f"({_core.kernels_description()}); set SKETCHPS_KERNELS={device.type} before importing "
                          "sketchps, or move the model")


class FlatModel:
    """The named parameters as views into one flat parameter and one flat gradient buffer."""

    def __init__(self, named, buffer_names=()):
        if not named:
            raise ConfigError("model: no parameters")
        if buffer_names:
            raise ConfigError(f"model: has buffer '{buffer_names[0]}' (state outside the flat vector, e.g. BatchNorm "
                              "running statistics); use GroupNorm/LayerNorm or no normalization")
        self.device = named[0][1].device
        _check_device(self.device)
        seen = set()
        for name, p in named:
            _check_parameter(name, p, self.device)
            if id(p) in seen:
                raise ConfigError(f"model: parameter '{name}' is registered twice (shared weights are not supported)")
            seen.add(id(p))
        self.names = [n for n, _ in named]
        self.parameters = [p for _, p in named]
        self.offsets = []
        dim = 0
        for p in self.parameters:
            self.offsets.append(dim)
            dim += p.numel()
        self.dim = dim
        self.params = torch.empty(dim, dtype=torch.float32, device=self.device)
        self.grads = torch.zeros(dim, dtype=torch.float32, device=self.device)
        with torch.no_grad():
            for p, off in zip(self.parameters, self.offsets):
                view = self.params[off:off + p.numel()].view_as(p)
                view.copy_(p.detach())
                p.data = view  # the registered parameter now aliases the flat buffer
                p.grad = self._grad_view(p, off)

    def _grad_view(self, p, off):
        return self.grads[off:off + p.numel()].view_as(p)

    @property
    def layout(self):
        """(name, shape) in flat order: the job's layers."""
        return [(n, list(p.shape)) for n, p in zip(self.names, self.parameters)]

    def worker_buffers(self):
        """What _core.Worker takes after the layout: the buffers' addresses, length and device kind
        (once torch's copies into them are done: the core reads them next)."""
        torch_work_done(self.device)
        return dict(params=self.params.data_ptr(), grads=self.grads.data_ptr(), dim=self.dim,
                    device=self.device.type)

    def zero_grad(self):
        """Zeroes the gradient buffer; every .grad is (again) a view into it."""
        self.grads.zero_()
        for p, off in zip(self.parameters, self.offsets):
            if not self._grad_aliases(p, off):
                p.grad = self._grad_view(p, off)

    def _grad_aliases(self, p, off):
        g = p.grad
        return (g is not None and g.is_contiguous() and g.shape == p.shape
                and g.data_ptr() == self.grads.data_ptr() + 4 * off)

    def verify(self):
        """OrderError naming the first parameter whose .data or .grad left the buffers."""
        base = self.params.data_ptr()
        for name, p, off in zip(self.names, self.parameters, self.offsets):
            if p.device != self.device or not p.is_contiguous() or p.data_ptr() != base + 4 * off:
                raise OrderError(f"parameter '{name}' no longer aliases the flat parameter buffer (re-assigned or "
                                 "moved after DistributedOptimizer was made)")
            if p.grad is None:
                raise OrderError(f"parameter '{name}' .grad is undefined (was it set to None by "
                                 "zero_grad(set_to_none=True) of the model or the torch optimizer after "
                                 "DistributedOptimizer.zero_grad()? call only the DistributedOptimizer's zero_grad)")
            if not self._grad_aliases(p, off):
                raise OrderError(f"parameter '{name}' .grad no longer aliases the flat gradient buffer (replaced "
                                 "after DistributedOptimizer.zero_grad())")


class GradientHooks:
    """A hook on each parameter's gradient accumulator that calls worker.gradient_accumulated(index)."""

    def __init__(self, flat, worker):
        self._accumulators = []  # the nodes hold the hooks: they must live as long as the model
        self._grads = flat.grads
        self._version = None  # the gradient buffer's version counter after the last accumulation
        with torch.enable_grad():  # expand_as records no grad_fn under no_grad
            for i, p in enumerate(flat.parameters):
                accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
                accumulator.register_hook(self._hook(i, flat.device, worker))
                self._accumulators.append(accumulator)

    def _hook(self, index, device, worker):
        def accumulated(grad_inputs, grad_outputs):
            torch_work_done(device)
            self._version = self._grads._version  # every .grad is a view: they share the buffer's counter
            worker.gradient_accumulated(index)
        return accumulated

    def check_unchanged(self):
        """OrderError when a .grad changed in place after the backward's last accumulation (e.g.
        torch.nn.utils.clip_grad_norm_ between backward and step): with overlap the exchange read
        each gradient as autograd completed it, so the change would be lost without a word."""
        seen, self._version = self._version, None
        if seen is None or self._grads._version == seen:
            return
        raise OrderError("step: the gradients were changed in place after backward (torch.nn.utils.clip_grad_norm_, "
                         "or another change of .grad between backward and step()), but with overlap each shard's "
                         "exchange starts during backward with the gradients as autograd left them, so the change "
                         "would be lost; to clip as DDP does (the aggregated gradient), pass clip_grad_norm=max_norm "
                         "to DistributedOptimizer instead of calling clip_grad_norm_; to change the local gradient "
                         "before it is sent, pass overlap=False")
