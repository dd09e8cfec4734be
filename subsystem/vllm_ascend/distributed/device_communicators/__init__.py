"""Device communicators: collectives of vLLM's process groups on Ascend NPUs.

- `npu_communicator.NPUCommunicator`: vLLM's `DeviceCommunicatorBase` over the device group
  (HCCL through `torch_npu` on an NPU); the platform names it by its dotted path.

Nothing is imported here: the module imports torch and vLLM.
"""
