"""deepspeed.utils' parts that deepshard has: set_z3_leaf_modules, the coarser ZeRO-3 units."""


def set_z3_leaf_modules(model, leaf_module_classes):
    """Makes every module of `model` whose class is in `leaf_module_classes` one ZeRO-3 unit
    (gathered, released and reduce-scattered as a whole, its submodules not hooked; FSDP's
    auto-wrap policy by class). Call before deepshard.initialize. Returns the modules marked."""
    classes = tuple(leaf_module_classes)
    marked = [m for m in model.modules() if isinstance(m, classes)]
    for m in marked:
        m._z3_leaf = True
    return marked


def z3_leaf_module(module):
    return getattr(module, "_z3_leaf", False)
