package org.apache.spark.ml.mmlspark

import scala.annotation.nowarn

import org.apache.spark.TaskContext

/** The CPUs Spark gave the running task. `TaskContext.cpus()` is on every supported line (4.3
  * deprecates it for `cpuAmount()`, a fractional amount that older lines lack), so one jar calls it
  * on all 4.x lines.
  */
object TaskCpus {

  /** The running task's CPUs, at least 1; 1 outside a task. */
  @nowarn("cat=deprecation")
  def get: Int = Option(TaskContext.get()).map(t => math.max(1, t.cpus())).getOrElse(1)
}
