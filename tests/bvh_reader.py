"""An independent BVH reader for the tests: the hierarchy (ROOTs, JOINTs,
End Sites, OFFSETs, CHANNELS in any order), the MOTION block, and forward
kinematics by the format's definition: a joint's world transform is its
parent's times [R | offset], R the product of its rotation channels in the
order listed (degrees), a position channel replacing the offset. Written
from the format's description, sharing nothing with src/pipeline/bvh.c."""

import numpy as np


def _axis_rot(axis, deg):
    a = np.radians(deg)
    c, s = np.cos(a), np.sin(a)
    return {"X": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
            "Y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
            "Z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])}[axis]


class Joint:
    def __init__(self, name, parent):
        self.name, self.parent = name, parent
        self.offset = np.zeros(3)
        self.channels = []
        self.end_site = None  # offset of its End Site, if any


def read(text):
    """-> (joints in file order, frame count, frame time, motion [frames, channels])."""
    tok = text.split()
    i = 0

    def take():
        nonlocal i
        i += 1
        return tok[i - 1]

    assert take() == "HIERARCHY"
    joints, stack = [], []
    while tok[i] != "MOTION":
        t = take()
        if t in ("ROOT", "JOINT"):
            j = Joint(take(), stack[-1] if stack and t == "JOINT" else None)
            assert (t == "ROOT") == (not stack), "ROOT inside a joint, or JOINT outside one"
            joints.append(j)
            assert take() == "{"
            stack.append(j)
        elif t == "End":
            assert take() == "Site" and take() == "{" and take() == "OFFSET"
            stack[-1].end_site = np.array([float(take()) for _ in range(3)])
            assert take() == "}"
        elif t == "OFFSET":
            stack[-1].offset = np.array([float(take()) for _ in range(3)])
        elif t == "CHANNELS":
            stack[-1].channels = [take() for _ in range(int(take()))]
        elif t == "}":
            stack.pop()
        else:
            raise ValueError(f"unexpected token {t!r}")
    assert not stack
    take()
    assert take() == "Frames:"
    n = int(take())
    assert take() == "Frame" and take() == "Time:"
    dt = float(take())
    width = sum(len(j.channels) for j in joints)
    values = np.array([float(v) for v in tok[i:]], np.float64)
    assert values.size == n * width, (values.size, n, width)
    return joints, n, dt, values.reshape(n, width)


def world(joints, row):
    """Each joint's world position (and its End Site's) at one motion row."""
    G, pos, ends, k = {}, {}, {}, 0
    for j in joints:
        R, t = np.eye(3), j.offset.copy()
        for ch in j.channels:
            v = row[k]
            k += 1
            if ch.endswith("position"):
                t["XYZ".index(ch[0])] = v
            else:
                R = R @ _axis_rot(ch[0], v)
        local = np.eye(4)
        local[:3, :3], local[:3, 3] = R, t
        G[j.name] = local if j.parent is None else G[j.parent.name] @ local
        pos[j.name] = G[j.name][:3, 3]
        if j.end_site is not None:
            ends[j.name] = G[j.name][:3, :3] @ j.end_site + G[j.name][:3, 3]
    return pos, ends
