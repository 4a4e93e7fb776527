# The policy worker: the only place where the agent's code runs during grading.
# The grader starts it confined (tasks/_shared/rl_grader/confine.py), in a private copy
# of the submission, with the text of wire.py prepended and no access to the grader's
# files, seeds or process.  It imports src/networks.py, rebuilds the network from
# config.yaml, loads each checkpoint, and answers "act" requests: a batch of
# observations in, one action per observation out.  It never sees a reward.
import os
import sys
import traceback

if "write_frame" not in globals():  # run on its own (not prepended with wire.py)
    from wire import WireError, blocking_reader, read_frame, write_frame

_proto_out = os.dup(1)          # frames go to the real stdout; the agent's prints go to stderr
os.dup2(2, 1)
sys.stdout = sys.stderr
_read_exact = blocking_reader(0)


def _say(header, payload=b""):
    write_frame(_proto_out, header, payload)


def _failure(exc):
    lines = traceback.format_exception(exc)
    return "".join(lines[-8:]).strip()


def _leaves(tree, prefix=""):
    """{path: leaf} of a nested dict of arrays (flax state dicts)."""
    if isinstance(tree, dict):
        out = {}
        for key, value in tree.items():
            out.update(_leaves(value, f"{prefix}/{key}" if prefix else str(key)))
        return out
    return {prefix: tree}


def _mismatch(expected, found):
    """Why a checkpoint's parameters do not fit the network, or None."""
    import numpy as np

    want, have = _leaves(expected), _leaves(found)
    problems = []
    missing = sorted(set(want) - set(have))
    extra = sorted(set(have) - set(want))
    if missing:
        problems.append(f"parameters missing from the checkpoint: {', '.join(missing[:6])}")
    if extra:
        problems.append(f"parameters the network does not have: {', '.join(extra[:6])}")
    for path in sorted(set(want) & set(have)):
        w, h = np.shape(want[path]), np.shape(have[path])
        if w != h:
            problems.append(f"{path} has shape {tuple(h)} in the checkpoint but {tuple(w)} "
                            "in the network")
            if len(problems) > 6:
                break
    return "; ".join(problems) or None


def main():
    names = sys.argv[1:]
    try:
        import jax
        import yaml
        from flax import serialization
    except BaseException as exc:
        _say({"error": "the grader's Python cannot import jax, flax and yaml: " + _failure(exc)})
        return
    try:
        config = yaml.safe_load(open("config.yaml").read())
    except BaseException as exc:
        _say({"error": "config.yaml cannot be read as YAML: " + _failure(exc)})
        return
    if not isinstance(config, dict):
        _say({"error": "config.yaml must hold a mapping (env_name, train, network...)"})
        return
    sys.path.insert(0, os.path.join(os.getcwd(), "src"))
    try:
        import networks
        model, template = networks.get_model_ready(jax.random.PRNGKey(0), config)
    except BaseException as exc:
        _say({"error": "src/networks.py: get_model_ready(rng, config) failed with config.yaml: "
                       + _failure(exc)})
        return
    expected = serialization.to_state_dict(template)
    params = []
    for name in names:
        where = f"checkpoints/{name}"
        try:
            raw = serialization.msgpack_restore(open(where, "rb").read())
        except BaseException as exc:
            _say({"error": f"{where} is not a flax msgpack file of network parameters "
                           f"(save them with flax.serialization.to_bytes): {_failure(exc)}"})
            return
        problem = _mismatch(expected, raw) if isinstance(raw, dict) else "it holds no parameter tree"
        if problem:
            _say({"error": f"{where} does not fit the network that src/networks.py builds from "
                           f"config.yaml (config.yaml and the checkpoint disagree?): {problem}"})
            return
        try:
            params.append(serialization.from_state_dict(template, raw))
        except BaseException as exc:
            _say({"error": f"{where} cannot be loaded into the network: {_failure(exc)}"})
            return

    def act(p, obs, key):
        return model.apply(p, obs)[1].sample(seed=key)

    act = jax.jit(act)
    base = jax.random.PRNGKey(0)  # public: the grader's seeds never reach this process
    import numpy as np

    _say({"ready": True, "env_name": config.get("env_name")})
    calls = [0] * len(params)
    while True:
        header, payload = read_frame(_read_exact, 1 << 31)
        if header.get("op") != "act":
            return
        obs = np.frombuffer(payload, dtype=header["dtype"]).reshape(header["shape"])
        out, start = [], 0
        try:
            for index, rows in header["groups"]:
                calls[index] += 1
                key = jax.random.fold_in(jax.random.fold_in(base, index), calls[index])
                out.append(np.asarray(act(params[index], obs[start:start + rows], key)))
                start += rows
            actions = np.ascontiguousarray(np.concatenate(out))
        except BaseException as exc:
            _say({"error": "the policy failed on a batch of observations: " + _failure(exc)})
            return
        if actions.dtype.hasobject:
            _say({"error": f"the policy returned actions of dtype {actions.dtype}"})
            return
        _say({"dtype": actions.dtype.str, "shape": list(actions.shape)}, actions.tobytes())


try:
    main()
except WireError:
    pass
