package org.apache.spark.ml.mmlspark

import java.util.concurrent.TimeUnit

import scala.util.Try

import org.apache.spark.{SparkConf, SparkEnv, TaskContext}
import org.apache.spark.network.util.JavaUtils
import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst
import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.bitset.BitSetMethods

/** The Spark APIs outside its public, versioned surface that mmlspark's stages use: Catalyst's
  * array data, raw memory copies, Spark's size and duration parsers, its logging trait and the
  * executor's configuration. Every stage reaches them through here, so a Spark line that changes
  * one is adapted in this file (or in the per-line `SparkCompat`), never in the stages.
  */
object SparkInternals {

  /** Catalyst's array value, as an `array<...>` column reaches a UDF's internal rows. */
  type ArrayData = catalyst.util.ArrayData

  /** Catalyst's contiguous array layout: a header (length, null bits), then the elements. */
  type UnsafeArrayData = catalyst.expressions.UnsafeArrayData

  /** Spark's logging trait, which names loggers after the class as Spark's own do. */
  type Logging = org.apache.spark.internal.Logging

  /** The offset of element 0 in a JVM `byte[]`, for [[copyMemory]]. */
  final val ByteArrayOffset: Long = Platform.BYTE_ARRAY_OFFSET.toLong

  /** The offset of element 0 in a JVM `float[]`, for [[copyMemory]]. */
  final val FloatArrayOffset: Long = Platform.FLOAT_ARRAY_OFFSET.toLong

  /** The offset of element 0 in a JVM `double[]`, for [[copyMemory]]. */
  final val DoubleArrayOffset: Long = Platform.DOUBLE_ARRAY_OFFSET.toLong

  /** Copies `length` bytes; a null object with an address is off-heap memory. */
  def copyMemory(src: AnyRef, srcOffset: Long, dst: AnyRef, dstOffset: Long, length: Long): Unit =
    Platform.copyMemory(src, srcOffset, dst, dstOffset, length)

  /** Sets `length` bytes of off-heap memory at `address` to `value`. */
  def setMemory(address: Long, value: Byte, length: Long): Unit =
    Platform.setMemory(address, value, length)

  /** An array's values as Catalyst array data. */
  def toArrayData(values: Any): ArrayData = catalyst.util.ArrayData.toArrayData(values)

  /** A row over `values`, without copying them. */
  def rowOf(values: Array[Any]): Row = new catalyst.expressions.GenericRow(values)

  /** The bytes before the first element of an unsafe array of `n` elements. */
  def unsafeArrayHeaderBytes(n: Int): Long = catalyst.expressions.UnsafeArrayData
    .calculateHeaderPortionInBytes(n)
    .toLong

  /** Whether any of an unsafe array's elements is null (its null bits, a 64-bit word at a time). */
  def hasNullElement(a: UnsafeArrayData): Boolean =
    BitSetMethods.anySet(a.getBaseObject, a.getBaseOffset + 8, (a.numElements() + 63) / 64)

  /** A size such as "256m" or "1g", or a number of bytes, the way Spark's own settings read it. */
  def byteStringAsBytes(text: String): Long = JavaUtils.byteStringAsBytes(text)

  /** A duration such as "2ms" or "500us" in `unit`, the way Spark's own settings read it. */
  def timeStringAs(text: String, unit: TimeUnit): Long = JavaUtils.timeStringAs(text, unit)

  /** This JVM's Spark configuration; none outside a Spark driver or executor. */
  def executorConf: Option[SparkConf] = Option(SparkEnv.get).map(_.conf)

  /** This JVM's executor id ("driver" in local mode); none outside Spark. */
  def executorId: Option[String] = Option(SparkEnv.get).map(_.executorId)

  /** The cores of this executor: `spark.executor.cores`, the N of a `local[N]` or
    * `local-cluster[_, N, _]` master, else the JVM's processors.
    */
  def executorCores: Int = {
    val processors = Runtime.getRuntime.availableProcessors()
    val conf = executorConf
    val fromConf =
      conf.flatMap(_.getOption("spark.executor.cores")).flatMap(c => Try(c.trim.toInt).toOption)
    lazy val fromMaster = conf.flatMap(_.getOption("spark.master")).flatMap { master =>
      master.trim match {
        case "local" => Some(1)
        case LocalMaster("*") => Some(processors)
        case LocalMaster(n) => Some(n.toInt)
        case LocalClusterMaster(n) => Some(n.toInt)
        case _ => None
      }
    }
    math.max(1, fromConf.orElse(fromMaster).getOrElse(processors))
  }

  /** Tasks that may run at once in this JVM: its cores over `spark.task.cpus`. */
  def taskSlots: Int = {
    val perTask = executorConf
      .flatMap(c => Try(c.get("spark.task.cpus", "1").trim.toInt).toOption)
      .getOrElse(1)
    math.max(1, executorCores / math.max(1, perTask))
  }

  /** Runs `body` on this thread as part of `task`, so that what it calls sees the task
    * (`TaskContext.get`), as a task's reading thread would.
    */
  def asTask[T](task: TaskContext)(body: => T): T = {
    TaskContext.setTaskContext(task)
    try body
    finally TaskContext.unset()
  }

  private val LocalMaster = """local\[(\d+|\*)(?:,\d+)?\]""".r
  private val LocalClusterMaster = """local-cluster\[\s*\d+\s*,\s*(\d+)\s*,.*\]""".r
}
