package mmlspark.core

import java.util.ServiceLoader

import scala.jdk.CollectionConverters._

import org.apache.spark.ml.{Estimator, Transformer}
import org.apache.spark.ml.evaluation.Evaluator

/** The library's stages, as its `META-INF/services` files list them (the files Spark Connect reads
  * to instantiate stages; the code generator writes them from [[ClassScan]]).
  */
object Stages {

  /** The service types the library registers stages under, one services file each. */
  val kinds: Seq[Class[_]] = Seq(classOf[Transformer], classOf[Estimator[_]], classOf[Evaluator])

  /** Every registered stage or evaluator under package `mmlspark`, sorted by name. Classes are
    * loaded, not instantiated.
    */
  lazy val all: Seq[Class[_]] =
    kinds
      .flatMap { kind =>
        ServiceLoader
          .load(kind, getClass.getClassLoader)
          .stream()
          .iterator()
          .asScala
          .map(_.`type`())
      }
      .filter(_.getName.startsWith("mmlspark."))
      .distinct
      .sortBy(_.getName)

  /** The class names of [[all]], as an array for callers outside Scala (Python tests). */
  def names: Array[String] = all.map(_.getName).toArray

  /** The area of a stage: `mmlspark.stages.SelectColumns` is in area `stages`. */
  def area(cls: Class[_]): String = cls.getPackage.getName.stripPrefix("mmlspark.")
}
