/**
 * The trainer: tensors, backends (cpu, cuda), layers, optimizers, weight offload, the data loader
 * and the training loop. It reads shards through {@code dev.ramtrain.etl.shard} only, never Spark.
 */
package dev.ramtrain.trainer;
