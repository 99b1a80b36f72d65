"""A torch.nn.Module as the engines' ModuleTree (deepshard/zero/engine.h): its submodule tree with
its own tensors (the same objects, nothing copied), and its ZeRO-3 units: the modules whose
forwards gather their parameters. By default a module without submodules that holds a trainable
parameter is a unit (DeepSpeed hooks every module), and so is, with its whole subtree, a module
that holds trainable parameters of its own and has submodules (its forward may use theirs
directly, as nn.MultiheadAttention uses out_proj's); utils.set_z3_leaf_modules makes any module
with its whole subtree one unit. Parameters of other modules, and tied ones (a tensor used
at places in different units or outside units), stay in the always-gathered root; when nothing
would be left there, the first unit becomes part of the root (FSDP keeps its root gathered)."""
from .utils import z3_leaf_module


def tree_of(module):
    """(parameters, buffers, children) of `module`, recursively, as _C.Engine takes it."""
    params = [(n, p) for n, p in module._parameters.items() if p is not None]
    buffers = [(n, b) for n, b in module._buffers.items() if b is not None]
    children = [(n, tree_of(c)) for n, c in module._modules.items() if c is not None]
    return (params, buffers, children)


def has_own_trainable(module):
    return any(p.requires_grad for p in module._parameters.values() if p is not None)


def _within(path, unit):
    return path == unit or path.startswith(unit + ".")


def candidate_units(model):
    """Module paths of the ZeRO-3 unit candidates, in registration order."""
    units = []

    def walk(module, path):
        children = [(n, c) for n, c in module._modules.items() if c is not None]
        if path and (z3_leaf_module(module) or has_own_trainable(module)):
            units.append(path)
            return
        for n, c in children:
            walk(c, f"{path}.{n}" if path else n)

    walk(model, "")
    return units


def resolve_units(model):
    """The units (module paths) the engine shards: the candidates that hold a trainable parameter
    of their own (not tied elsewhere), leaving the root at least one."""
    units = candidate_units(model)
    places = {}  # id(param) -> (param, [module paths])
    for path, module in model.named_modules(remove_duplicate=False):
        for p in module._parameters.values():
            if p is not None and p.requires_grad:
                places.setdefault(id(p), (p, []))[1].append(path)

    def unit_of(path):
        for i, u in enumerate(units):
            if _within(path, u):
                return i
        return None

    owned = {i: 0 for i in range(len(units))}
    root = 0
    for _, paths in places.values():
        homes = {unit_of(path) for path in paths}
        if len(homes) == 1 and None not in homes:
            owned[homes.pop()] += 1
        else:
            root += 1
    units = [u for i, u in enumerate(units) if owned[i] > 0]
    if root == 0 and units:
        units = units[1:]
    return units
