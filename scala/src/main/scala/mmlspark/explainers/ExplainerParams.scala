package mmlspark.explainers

import mmlspark.contracts.{HasInputCol, SchemaUtils, StageWritable}
import org.apache.hadoop.fs.Path
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.Params
import org.apache.spark.ml.linalg.SQLDataTypes.VectorType
import org.apache.spark.sql.{DataFrame, Dataset, SparkSession}
import org.apache.spark.sql.types._

/** What every explainer has: the model, the target it explains, the samples per row, the output and
  * metrics columns, and the background rows (data of the stage, not a param: saved as Parquet under
  * `backgroundData` next to the metadata).
  */
private[explainers] trait ExplainerParams extends ExplainerParamsDecls with StageWritable {

  setDefault(
    targetCol -> "probability",
    targetClasses -> Array.empty[Int],
    metricsCol -> "r2",
    outputCol -> "explanation"
  )

  private var background: Option[DataFrame] = None

  /** The background rows: what "absent" means for a feature (SHAP), or the statistics samples are
    * drawn from (LIME). Keep it small: every explained row is scored against each of them.
    */
  def setBackgroundData(value: DataFrame): this.type = {
    background = Option(value)
    this
  }

  /** The background rows, or null when none was set. */
  def getBackgroundData: DataFrame = background.orNull

  protected def copyBackground(to: ExplainerParams): Unit = to.background = background

  protected def requireBackground(): DataFrame = {
    SchemaUtils.require(
      this,
      background.isDefined,
      ExplainerMessages.NoBackground()
    )
    background.get
  }

  override def saveData(path: String, spark: SparkSession): Unit =
    background.foreach(_.write.parquet(new Path(path, ExplainerParams.BackgroundDir).toString))

  private[explainers] def explainedModel: Transformer = {
    SchemaUtils.require(this, isDefined(model), ExplainerMessages.NoModel())
    SchemaUtils.requireTransformer(this, "model", $(model))
  }

  /** The checks every explainer makes before any job: the output columns are new, the target
    * classes column holds integer arrays, and the model gives a numeric targetCol. Gives the output
    * schema.
    */
  protected def checkCommon(schema: StructType): StructType = {
    SchemaUtils.requireAbsent(this, schema, $(outputCol))
    SchemaUtils.requireAbsent(this, schema, $(metricsCol))
    SchemaUtils.require(
      this,
      $(outputCol) != $(metricsCol),
      ExplainerMessages.SameOutputs("column" -> $(outputCol))
    )
    ExplainerParams.checkTargets(
      this,
      schema,
      explainedModel,
      $(targetCol),
      $(targetClasses),
      get(targetClassesCol)
    )
    schema
      .add(StructField($(outputCol), ArrayType(VectorType, containsNull = false)))
      .add(StructField($(metricsCol), VectorType))
  }
}

/** An explainer of the elements of the vector column `inputCol`: its checks, and the rows and the
  * background it explains.
  */
private[explainers] trait VectorInput extends ExplainerParams with HasInputCol {

  protected def checkVectorSchema(schema: StructType): StructType = {
    SchemaUtils.require(this, isDefined(inputCol), ExplainerMessages.NoInputCol())
    requireVector(schema)
    checkCommon(schema)
  }

  private def requireVector(schema: StructType): Unit =
    SchemaUtils.requireColumnType(this, schema, $(inputCol), ExplainerMessages.VectorType())(
      SchemaUtils.isVector
    )

  /** The rows to explain and the background, checked before any job. */
  protected def checkedInput(dataset: Dataset[_]): (DataFrame, DataFrame) = {
    checkVectorSchema(dataset.schema)
    val data = dataset.toDF()
    Explaining.requireBatch(this, data)
    val background = requireBackground()
    requireVector(background.schema)
    (data, background)
  }
}

private[explainers] object ExplainerParams {
  val BackgroundDir = "backgroundData"

  def isTarget(t: DataType): Boolean = t match {
    case VectorType => true
    case ArrayType(_: NumericType, _) => true
    case _: NumericType => true
    case _ => false
  }

  /** The target checks of every explainer, ICETransformer's too: the target classes are not
    * negative, `targetClassesCol` (when set) holds integer arrays, and `model` gives a numeric
    * `targetCol` on `schema`.
    */
  def checkTargets(
      stage: Params,
      schema: StructType,
      model: Transformer,
      targetCol: String,
      targetClasses: Array[Int],
      targetClassesCol: Option[String]
  ): Unit = {
    SchemaUtils.require(
      stage,
      targetClasses.forall(_ >= 0),
      ExplainerMessages.NegativeClasses("classes" -> targetClasses.mkString(", "))
    )
    targetClassesCol.foreach { name =>
      SchemaUtils.requireColumnType(stage, schema, name, ExplainerMessages.ClassesType()) {
        case ArrayType(IntegerType, _) => true
        case _ => false
      }
    }
    SchemaUtils.requireColumnType(
      stage,
      model.transformSchema(schema),
      targetCol,
      ExplainerMessages.TargetType()
    )(isTarget)
  }

  /** The background saved with a stage at `path`, if one was. */
  def loadBackground(path: String, spark: SparkSession): Option[DataFrame] = {
    val dir = new Path(path, BackgroundDir)
    val fs = dir.getFileSystem(spark.sparkContext.hadoopConfiguration)
    if (fs.exists(dir)) Some(spark.read.parquet(dir.toString)) else None
  }
}
