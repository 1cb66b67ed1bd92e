"""Run inside Blender (tests/test_blender.py):

    blender -b --factory-startup --python tests/blender/check_import.py -- KIND FILE OUT.json [FRAME ...]

imports FILE (KIND glb or bvh) the way docs/usage.md tells a user to, with
the workarounds Debian 12's Blender 3.4 needs, and writes what a test
checks to OUT.json: the scene's frame rate and range, per armature its
bones and its action's keyframe frames, per skinned mesh its vertex groups,
weights and whether turning a finger bone moves its vertices, and at each
FRAME the world position of every bone's head.

GLB: the clip's frame rate is read from the file's scene extras ("fps",
"frame_start", "frame_end") and set on the scene before the import, since
the importer turns seconds into frames at the scene's rate; the import
uses import_shading="SMOOTH" (the default NORMALS path of the 3.4 add-on
calls numpy.bool, gone from NumPy 1.24). BVH: the 3.4 add-on opens the file
with mode "rU", which Python 3.11 refuses; "r" is what it meant.
"""

import builtins
import json
import struct
import sys

import bpy

args = sys.argv[sys.argv.index("--") + 1:]
kind, path, out = args[0], args[1], args[2]
frames = [int(f) for f in args[3:]]
scene = bpy.context.scene

if kind == "glb":
    with open(path, "rb") as f:
        f.seek(12)
        n = struct.unpack("<I", f.read(4))[0]
        f.read(4)
        extras = json.loads(f.read(n))["scenes"][0].get("extras", {})
    if "fps" in extras:
        fps = extras["fps"]
        scene.render.fps = round(fps)
        scene.render.fps_base = round(fps) / fps
        scene.frame_start, scene.frame_end = extras["frame_start"], extras["frame_end"]
    bpy.ops.import_scene.gltf(filepath=path, import_shading="SMOOTH")
else:
    import io_anim_bvh.import_bvh as import_bvh
    import_bvh.open = lambda f, mode="r", *a, **k: builtins.open(f, mode.replace("U", ""), *a, **k)
    bpy.ops.import_anim.bvh(filepath=path, update_scene_fps=True, update_scene_duration=True)

doc = {"fps": scene.render.fps / scene.render.fps_base, "frame_start": scene.frame_start,
       "frame_end": scene.frame_end, "armatures": {}, "meshes": {}, "joints": {}}
armatures = [o for o in bpy.data.objects if o.type == "ARMATURE"]
for arm in armatures:
    a = {"bones": [b.name for b in arm.data.bones], "keys": []}
    act = arm.animation_data.action if arm.animation_data else None
    if arm.animation_data and not act and arm.animation_data.nla_tracks:
        act = arm.animation_data.nla_tracks[0].strips[0].action
        arm.animation_data.action = act  # the glTF importer stashes it: play it
    if act:
        a["keys"] = sorted({round(k.co[0], 6) for c in act.fcurves for k in c.keyframe_points})
        a["frame_range"] = list(act.frame_range)
    doc["armatures"][arm.name] = a

for f in frames:
    scene.frame_set(f)
    doc["joints"][str(f)] = {b.name: list(arm.matrix_world @ b.head) for arm in armatures for b in arm.pose.bones}

for mesh in [o for o in bpy.data.objects if o.type == "MESH" and o.find_armature()]:
    arm = mesh.find_armature()
    me = mesh.data
    sums = [sum(g.weight for g in v.groups) for v in me.vertices]
    entry = {"armature": arm.name, "vertices": len(me.vertices), "groups": [g.name for g in mesh.vertex_groups],
             "weight_sum_min": min(sums), "weight_sum_max": max(sums),
             "max_groups_per_vertex": max(len(v.groups) for v in me.vertices)}
    # the skin is live: turn the first finger bone by 30 degrees, count the vertices that move
    scene.frame_set(frames[0] if frames else scene.frame_start)
    deps = bpy.context.evaluated_depsgraph_get()
    before = [v.co.copy() for v in mesh.evaluated_get(deps).to_mesh().vertices]
    bone = next(b for b in arm.pose.bones if b.name.endswith("index1"))
    saved = bone.rotation_mode, tuple(bone.rotation_quaternion), tuple(bone.rotation_euler)
    if arm.animation_data:
        arm.animation_data.action, keep = None, arm.animation_data.action
    bone.rotation_mode = "XYZ"
    bone.rotation_euler = (0.5236, 0, 0)
    deps.update()
    after = [v.co for v in mesh.evaluated_get(deps).to_mesh().vertices]
    entry["moved_by_index1"] = sum((a - b).length > 1e-6 for a, b in zip(after, before))
    bone.rotation_mode = saved[0]
    bone.rotation_quaternion, bone.rotation_euler = saved[1], saved[2]
    if arm.animation_data:
        arm.animation_data.action = keep
    doc["meshes"][mesh.name] = entry

with open(out, "w") as f:
    json.dump(doc, f)
