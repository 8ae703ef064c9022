"""The scene of the outputs' summaries tests (issue 30 item 5: plot, info, compare, sweep): a bar
hinged at one end, lifted against gravity by a position servo to a parameter ``target``, with
two outputs, and the closed form of where it comes to rest."""

from __future__ import annotations

import math

from scipy.optimize import brentq

MASS, HALF, INERTIA, GRAVITY, KP, KD = 2.0, 0.5, 0.1, 9.81, 400.0, 20.0

# I = 0.1 + 2 0.5^2 = 0.6 about the hinge: wn = 25.8 rad/s, zeta = 0.645; at rest within 1e-6 after 1 s
SERVO = f"""
mbsim: 1
name: servo bar
dimension: 2
parameters: {{target: 0.3}}
gravity: [0, {-GRAVITY}]
time: {{end: 1.0, step: 0.001}}
solver: {{method: lagrange, integrator: rk4}}
output: {{every: 10}}
bodies:
  - {{name: bar, mass: {MASS}, inertia: {INERTIA}, position: [{HALF}, 0]}}
joints:
  - {{name: hinge, type: revolute, body1: ground, body2: bar, point: [0, 0]}}
actuators:
  - {{name: lift, joint: hinge, type: position, kp: {KP}, kd: {KD}, target: "target"}}
outputs:
  - {{name: angle, value: "q.hinge"}}
  - {{name: tip_y, value: "bar.y + {HALF}*sin(bar.angle)"}}
  - {{name: cubic, value: "t**3 - 2*t"}}
"""


def rest_angle(target: float) -> float:
    """The servo's torque holds the bar's weight: kp (target - q) = m g r cos q."""
    return brentq(lambda q: KP * (target - q) - MASS * GRAVITY * HALF * math.cos(q), -1.0, 1.0, xtol=1e-15)
