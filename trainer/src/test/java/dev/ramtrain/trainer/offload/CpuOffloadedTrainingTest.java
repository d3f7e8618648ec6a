package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.backend.cpu.SimulatedBus;

class CpuOffloadedTrainingTest extends OffloadedTrainingTest {
  @Override
  protected Backend open(SimulatedBus bus) {
    return new CpuBackend(2, bus);
  }
}
