package mmlspark.onnx

import scala.jdk.CollectionConverters._

import ai.onnxruntime.{OrtEnvironment, OrtProvider}
import org.apache.spark.TaskContext
import org.apache.spark.ml.mmlspark.SparkInternals
import org.apache.spark.sql.SparkSession
import org.json4s.{JArray, JBool, JInt, JObject, JString}
import org.json4s.jackson.JsonMethods.{compact, render}

/** The device a session runs on. */
sealed trait Device
case object Cpu extends Device { override def toString = "cpu" }
final case class Cuda(id: Int) extends Device { override def toString = s"cuda:$id" }

object Device {

  def cudaAvailable: Boolean = OrtEnvironment.getAvailableProviders.contains(OrtProvider.CUDA)

  /** The GPU addresses Spark assigned to the running task (none outside a task or without GPU
    * scheduling).
    */
  def taskGpus: Seq[String] = Option(TaskContext.get())
    .flatMap(_.resources().get("gpu"))
    .map(_.addresses.toSeq)
    .getOrElse(Nil)

  /** The device for `deviceType` ("auto", "cpu" or "cuda") in a task that was given the GPUs
    * `gpus`: the first of them (device 0 where Spark schedules no GPUs). `cuda` without the CUDA
    * provider is an error; `auto` then runs on the CPU.
    */
  def select(deviceType: String, gpus: Seq[String], cudaAvailable: Boolean): Device =
    deviceType match {
      case "cpu" => Cpu
      case "cuda" | "auto" if cudaAvailable =>
        val address = gpus.headOption.getOrElse("0")
        Cuda(scala.util.Try(address.toInt).toOption.getOrElse {
          throw new IllegalArgumentException(
            s"Spark gave this task GPU address '$address', which is not a CUDA device number"
          )
        })
      case "cuda" =>
        throw new IllegalStateException(
          "deviceType is 'cuda' but the ONNX Runtime on this executor has no CUDA provider " +
            s"(available: ${OrtEnvironment.getAvailableProviders.asScala.mkString(", ")}). Put the " +
            "GPU build (com.microsoft.onnxruntime:onnxruntime_gpu, with CUDA and cuDNN installed) " +
            "on the classpath instead of the CPU build, or set deviceType to 'auto' or 'cpu'"
        )
      case "auto" => Cpu
      case other => throw new IllegalArgumentException(s"unknown deviceType '$other'")
    }

  /** Runs a job of `tasks` tasks and reports, for each, what ONNXModel sees there: a JSON object
    * with the partition, the executor, the GPU addresses Spark assigned to the task, the CUDA
    * device `deviceType` 'cuda' binds it to, whether this executor's ONNX Runtime has the CUDA
    * provider, and when the task ran (epoch milliseconds). A check of a cluster's GPU scheduling.
    */
  def taskAssignments(spark: SparkSession, tasks: Int, holdMillis: Int): Array[String] =
    spark.sparkContext
      .parallelize(0 until tasks, tasks)
      .mapPartitions { _ =>
        val start = System.currentTimeMillis()
        val gpus = taskGpus
        val device =
          if (gpus.isEmpty) "none" else select("cuda", gpus, cudaAvailable = true).toString
        Thread.sleep(holdMillis) // so that tasks overlap and concurrent assignments show
        val task = TaskContext.get()
        Iterator(
          compact(
            render(
              JObject(
                "partition" -> JInt(task.partitionId()),
                "executor" -> JString(SparkInternals.executorId.getOrElse("driver")),
                "gpus" -> JArray(gpus.map(JString(_)).toList),
                "device" -> JString(device),
                "cudaAvailable" -> JBool(cudaAvailable),
                "start" -> JInt(start),
                "end" -> JInt(System.currentTimeMillis())
              )
            )
          )
        )
      }
      .collect()
}
