package mmlspark.codegen

import mmlspark.contracts.{StageArrayParam, StageParam}
import org.apache.spark.ml.PipelineStage
import org.apache.spark.ml.param._

/** The [[ParamType]] of a stage's param, keyed by the class of the Param object and the value class
  * its getter returns (the value class tells the generic `Param[T]` apart, whose `T` is erased).
  * Every param a stage declares must have a row; the generator fails on any other, so Python never
  * receives a param it cannot convert.
  */
object ParamTypes {

  private val byParamClass: Map[(Class[_], Class[_]), ParamType] = Map(
    (classOf[Param[_]], classOf[String]) -> ParamType.string,
    (classOf[IntParam], java.lang.Integer.TYPE) -> ParamType.int,
    (classOf[LongParam], java.lang.Long.TYPE) -> ParamType.long,
    (classOf[FloatParam], java.lang.Float.TYPE) -> ParamType.float,
    (classOf[DoubleParam], java.lang.Double.TYPE) -> ParamType.double,
    (classOf[BooleanParam], java.lang.Boolean.TYPE) -> ParamType.boolean,
    (classOf[StringArrayParam], classOf[Array[String]]) -> ParamType.stringArray,
    (classOf[IntArrayParam], classOf[Array[Int]]) -> ParamType.intArray,
    (classOf[DoubleArrayParam], classOf[Array[Double]]) -> ParamType.doubleArray,
    (classOf[StageParam], classOf[PipelineStage]) -> ParamType.stage,
    (classOf[StageArrayParam], classOf[Array[PipelineStage]]) -> ParamType.stageArray
  )

  /** Every Param class a stage may use, for error messages. */
  def supported: Seq[String] =
    byParamClass.keys.toSeq.map { case (p, v) => s"${p.getSimpleName}[${v.getSimpleName}]" }.sorted

  /** The type of `param`, whose getter returns `getterType`. */
  def of(param: Param[_], getterType: Class[_]): Option[ParamType] =
    byParamClass.get((param.getClass, getterType))
}
