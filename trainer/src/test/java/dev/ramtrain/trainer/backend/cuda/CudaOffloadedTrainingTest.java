package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.CudaSpec;
import dev.ramtrain.trainer.backend.cpu.SimulatedBus;
import dev.ramtrain.trainer.offload.OffloadedTrainingTest;

/**
 * The offload exactness suite (streamed == resident, bit for bit) on the CUDA backend: the host
 * optimizer and host clipping must give the device kernels' bits. A run that asks for a slow bus
 * gets an emulated device whose every host-device copy waits first.
 */
class CudaOffloadedTrainingTest extends OffloadedTrainingTest {
  @Override
  protected Backend open(SimulatedBus bus) {
    BackendSpec spec = new BackendSpec(BackendSpec.Kind.CUDA, 2, CudaSpec.defaults());
    return bus == SimulatedBus.NONE
        ? EmulatorFaults.open(spec)
        : EmulatorFaults.open(spec, "slow-copy-us=500");
  }
}
