"""The signals' kernel (signal_kernels.pxd) checked against mbsim.model.signals.KINDS at import."""

from mbsim.model.signals import KINDS

_KERNEL_KINDS = {
    "coordinate": SIG_COORDINATE, "rate": SIG_RATE, "position": SIG_POSITION, "velocity": SIG_VELOCITY,
    "angular_velocity": SIG_ANGULAR_VELOCITY, "quaternion": SIG_QUATERNION, "angle": SIG_ANGLE,
    "distance": SIG_DISTANCE, "actuator": SIG_ACTUATOR,
}
if [_KERNEL_KINDS[k] for k in KINDS] != list(range(len(KINDS))):
    raise ImportError("signal_kernels.pxd's kinds differ from mbsim.model.signals.KINDS")
