"""Exudyn as a peer: rigid bodies in maximal coordinates solved by generalized-alpha (``ExudynSim``), and a
tree as one ``ObjectKinematicTree`` solved by an explicit solver (``ExudynTreeSim``). ``import exudyn``
below is the library (absolute imports), not this module."""

from __future__ import annotations

import time

import numpy as np

from benchmarks.peers.shared import System, _tree


def _exudyn_settings(exu, steps: int, step: float):
    """Exudyn simulation settings of a timed run: ``steps`` steps of ``step``, quiet, no solution file."""
    s = exu.SimulationSettings()
    s.timeIntegration.numberOfSteps = int(steps)
    s.timeIntegration.endTime = steps * step
    s.timeIntegration.verboseMode = 0
    s.solution.file.write = False
    s.show.statistics = False
    return s


class ExudynSim:
    """An Exudyn system built anew for every run: rigid bodies in maximal coordinates (3D: Euler
    parameters, ``CreateRigidBody``; 2D: ``NodeRigidBody2D``), joints as constraints (3D:
    ``CreateSphericalJoint`` / ``CreateRevoluteJoint``; 2D: ``ObjectJointRevolute2D`` between
    position markers and ``ObjectJointPrismatic2D`` with the rotation constrained), gravity as each
    body's load; solved by ``SolveDynamic`` (generalized-alpha, Exudyn's defaults) at the scene's
    step, no solution file."""

    def __init__(self, system: System, sparse: bool = False):
        import exudyn

        self.exu = exudyn
        self.system = system
        self.sparse = sparse

    def build(self, steps: int, sensor: str | None = None):
        import exudyn as exu
        from exudyn.utilities import (
            MarkerBodyPosition,
            MarkerBodyRigid,
            ObjectGround,
            ObjectJointPrismatic2D,
            ObjectJointRevolute2D,
            RigidBodyInertia,
            SensorBody,
            VObjectJointPrismatic2D,
            VObjectJointRevolute2D,
        )

        system = self.system
        sc = exu.SystemContainer()
        mbs = sc.AddSystem()
        ground = mbs.AddObject(ObjectGround())
        flat = system.dimension == 2
        items = []
        for b in system.bodies:
            items.append(
                mbs.CreateRigidBody(
                    inertia=RigidBodyInertia(mass=b.mass, inertiaTensor=b.inertia, com=[0.0, 0.0, 0.0]),
                    referencePosition=b.pos.tolist(),
                    referenceRotationMatrix=b.rot,
                    initialVelocity=b.vel.tolist(),
                    initialAngularVelocity=b.omega.tolist(),
                    gravity=system.gravity.tolist(),
                    create2D=flat,
                    show=False,
                )
            )
        for j in system.joints:
            item0 = ground if j.parent < 0 else items[j.parent]
            item1 = items[j.child]
            if not flat:
                if j.type == "spherical":
                    mbs.CreateSphericalJoint(itemNumbers=[item0, item1], position=j.point.tolist(), show=False)
                elif j.type == "revolute":
                    mbs.CreateRevoluteJoint(
                        itemNumbers=[item0, item1], position=j.point.tolist(), axis=j.axis.tolist(), show=False
                    )
                else:
                    raise ValueError(f"Exudyn mapping: 3D joint type {j.type} not mapped")
                continue
            p0 = j.point if j.parent < 0 else system.bodies[j.parent].rot.T @ (j.point - system.bodies[j.parent].pos)
            child = system.bodies[j.child]
            p1 = child.rot.T @ (j.point - child.pos)
            if j.type == "revolute":
                m0 = mbs.AddMarker(MarkerBodyPosition(bodyNumber=item0, localPosition=p0.tolist()))
                m1 = mbs.AddMarker(MarkerBodyPosition(bodyNumber=item1, localPosition=p1.tolist()))
                mbs.AddObject(
                    ObjectJointRevolute2D(markerNumbers=[m0, m1], visualization=VObjectJointRevolute2D(show=False))
                )
            elif j.type == "prismatic":
                r0 = np.eye(3) if j.parent < 0 else system.bodies[j.parent].rot
                m0 = mbs.AddMarker(MarkerBodyRigid(bodyNumber=item0, localPosition=p0.tolist()))
                m1 = mbs.AddMarker(MarkerBodyRigid(bodyNumber=item1, localPosition=p1.tolist()))
                normal = np.cross([0.0, 0.0, 1.0], j.axis)
                mbs.AddObject(
                    ObjectJointPrismatic2D(
                        markerNumbers=[m0, m1],
                        axisMarker0=(r0.T @ j.axis).tolist(),
                        normalMarker1=(child.rot.T @ normal).tolist(),
                        constrainRotation=True,
                        visualization=VObjectJointPrismatic2D(show=False),
                    )
                )
            else:
                raise ValueError(f"Exudyn mapping: 2D joint type {j.type} not mapped")
        sensor_id = None
        if sensor is not None:
            sensor_id = mbs.AddSensor(
                SensorBody(
                    bodyNumber=items[system.index(sensor)],
                    outputVariableType=exu.OutputVariableType.Position,
                    storeInternal=True,
                    writeToFile=False,
                )
            )
        mbs.Assemble()
        s = _exudyn_settings(exu, steps, system.step)
        if self.sparse:
            s.linearSolver.solverType = exu.LinearSolverType.EigenSparse
        return sc, mbs, s, items, sensor_id

    def _solve(self, mbs, settings) -> int:
        ok = mbs.SolveDynamic(settings)
        if not ok:
            raise RuntimeError("Exudyn SolveDynamic returned False (the solver did not converge)")
        it = mbs.sys["dynamicSolver"].it
        return max(int(it.currentStepIndex) - 1, 1)  # steps taken (more than asked if it cut the step)

    def run(self, steps: int) -> tuple[float, int]:
        _sc, mbs, s, _items, _ = self.build(steps)
        start = time.perf_counter()
        taken = self._solve(mbs, s)
        return time.perf_counter() - start, taken

    def simulate(self, steps: int, body: str, history: bool = False):
        """(position of ``body``'s centre of mass at the end, [t, x, y, z] rows if ``history``)."""
        _sc, mbs, s, items, sensor = self.build(steps, sensor=body if history else None)
        self._solve(mbs, s)
        pos = np.array(mbs.GetObjectOutputBody(items[self.system.index(body)], self.exu.OutputVariableType.Position))
        rows = np.asarray(mbs.GetSensorStoredData(sensor)) if history else None
        return pos, rows


KINEMATIC_TREE_SOLVERS = {10: ("ExplicitEuler", "RK44"), 100: ("RK44",)}  # per chain size (N = 100: RK44 only)
KINEMATIC_TREE_LABELS = {"ExplicitEuler": "explicit Euler", "RK44": "explicit RK4 (RK44)"}


class ExudynTreeSim:
    """A tree system as one Exudyn ``ObjectKinematicTree`` (joint coordinates, ``CreateKinematicTree``)
    solved by an explicit solver (``ExplicitEuler``, ``RK44``) at the scene's step. Link frames as
    Pinocchio's joint frames (at the joint point, the child's start orientation), revolute joints
    about their z axis (the 2D scenes' joints); inertia at the centre of mass."""

    def __init__(self, system: System, solver: str):
        import exudyn

        self.exu = exudyn
        self.system = system
        self.solver = getattr(exudyn.DynamicSolverType, solver)
        children = _tree(system)
        order, self.links = list(children.get(-1, [])), []
        while order:
            j = order.pop(0)
            body = system.bodies[j.child]
            if j.type != "revolute" or not np.allclose(body.rot.T @ j.axis, [0.0, 0.0, 1.0]):
                raise ValueError("KinematicTree mapping: only revolute joints about the joint frame's z axis")
            self.links.append(j)
            order += children.get(j.child, [])
        if len(self.links) != len(system.bodies):
            raise ValueError("KinematicTree mapping: every body needs a joint path to the ground")

    def build(self, steps: int, sensor: str | None = None):
        import exudyn as exu
        from exudyn.utilities import RigidBodyInertia, SensorKinematicTree, TreeLink

        system = self.system
        frames: dict[int, np.ndarray] = {}
        index: dict[int, int] = {}
        links = []
        for k, j in enumerate(self.links):
            body = system.bodies[j.child]
            world = np.eye(4)
            world[:3, :3], world[:3, 3] = body.rot, j.point
            parent = np.eye(4) if j.parent < 0 else frames[j.parent]
            frames[j.child], index[j.child] = world, k
            com = body.rot.T @ (body.pos - j.point)
            inertia = RigidBodyInertia(mass=body.mass, inertiaTensor=body.inertia, com=com, inertiaTensorAtCOM=True)
            links.append(
                TreeLink(
                    linkInertia=inertia,
                    jointType=exu.JointType.RevoluteZ,
                    jointHT=np.linalg.inv(parent) @ world,
                    parent=-1 if j.parent < 0 else index[j.parent],
                    graphicsDataList=[],
                )
            )
        sc = exu.SystemContainer()
        mbs = sc.AddSystem()
        tree = mbs.CreateKinematicTree(listOfTreeLinks=links, gravity=system.gravity.tolist(), show=False)
        sensor_id = None
        if sensor is not None:
            b = system.index(sensor)
            j = self.links[index[b]]
            sensor_id = mbs.AddSensor(
                SensorKinematicTree(
                    objectNumber=tree,
                    linkNumber=index[b],
                    localPosition=(system.bodies[b].rot.T @ (system.bodies[b].pos - j.point)).tolist(),
                    outputVariableType=exu.OutputVariableType.Position,
                    storeInternal=True,
                    writeToFile=False,
                )
            )
        mbs.Assemble()
        s = _exudyn_settings(exu, steps, system.step)
        return sc, mbs, s, sensor_id

    def _solve(self, mbs, settings) -> int:
        if not mbs.SolveDynamic(settings, solverType=self.solver):
            raise RuntimeError("Exudyn SolveDynamic returned False")
        return max(int(mbs.sys["dynamicSolver"].it.currentStepIndex) - 1, 1)

    def run(self, steps: int) -> tuple[float, int]:
        _sc, mbs, s, _ = self.build(steps)
        start = time.perf_counter()
        taken = self._solve(mbs, s)
        return time.perf_counter() - start, taken

    def simulate(self, steps: int, body: str):
        _sc, mbs, s, sensor = self.build(steps, sensor=body)
        self._solve(mbs, s)
        return np.asarray(mbs.GetSensorValues(sensor), dtype=float), None
