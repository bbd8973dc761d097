package mmlspark.contracts

import org.apache.spark.ml.{PipelineStage, Transformer}
import org.apache.spark.ml.param.Params
import org.apache.spark.ml.linalg.SQLDataTypes.VectorType
import org.apache.spark.sql.types._

/** What a column must hold: `accepts` tells, `description` names it in errors ("binary"). */
final case class ColumnKind(description: String, accepts: DataType => Boolean)

object ColumnKind {
  val Binary: ColumnKind = ColumnKind("binary", _ == BinaryType)
}

/** Schema checks for `transformSchema`. Each failure names the stage, the column, what was expected
  * and what was found, and is raised before any Spark job runs.
  */
object SchemaUtils {

  def stageName(stage: Params): String = s"${stage.getClass.getSimpleName} ${stage.uid}"

  private def fail(stage: Params, message: String): Nothing =
    throw new IllegalArgumentException(s"${stageName(stage)}: $message")

  /** The field named `column`, or a failure listing the columns that do exist. */
  def requireColumn(stage: Params, schema: StructType, column: String): StructField =
    schema.fields.find(_.name == column).getOrElse {
      fail(
        stage,
        SchemaMessages.NoColumn("column" -> column, "available" -> schema.fieldNames.mkString(", "))
      )
    }

  /** The field named `column`, which must satisfy `accepts` (described as `expected`). */
  def requireColumnType(
      stage: Params,
      schema: StructType,
      column: String,
      expected: String
  )(accepts: DataType => Boolean): StructField = {
    val field = requireColumn(stage, schema, column)
    if (!accepts(field.dataType)) {
      fail(
        stage,
        SchemaMessages.ColumnType(
          "column" -> column,
          "expected" -> expected,
          "actual" -> field.dataType.catalogString
        )
      )
    }
    field
  }

  /** The field named `column`, which must be of `kind`. */
  def requireColumnType(
      stage: Params,
      schema: StructType,
      column: String,
      kind: ColumnKind
  ): StructField =
    requireColumnType(stage, schema, column, kind.description)(kind.accepts)

  /** An output column must not overwrite an existing one. */
  def requireAbsent(stage: Params, schema: StructType, column: String): Unit =
    if (schema.fieldNames.contains(column)) {
      fail(stage, SchemaMessages.ColumnExists("column" -> column))
    }

  def requireDistinct(stage: Params, what: String, names: Seq[String]): Unit = {
    val repeated = names.diff(names.distinct).distinct
    if (repeated.nonEmpty)
      fail(stage, SchemaMessages.NotDistinct("what" -> what, "repeated" -> repeated.mkString(", ")))
  }

  def require(stage: Params, condition: Boolean, message: => String): Unit =
    if (!condition) fail(stage, message)

  /** The value of the stage-valued param `param` as a Transformer (a fitted model), or a failure
    * that names the param and the class it holds.
    */
  def requireTransformer(stage: Params, param: String, value: PipelineStage): Transformer =
    value match {
      case t: Transformer => t
      case other =>
        fail(
          stage,
          SchemaMessages.NotTransformer("param" -> param, "held" -> other.getClass.getName)
        )
    }

  /** `name` as a column reference that is never parsed (dots and spaces stay literal). */
  def quoted(name: String): String = "`" + name.replace("`", "``") + "`"

  def isNumeric(dataType: DataType): Boolean = dataType.isInstanceOf[NumericType]

  def isVector(dataType: DataType): Boolean = dataType == VectorType
}
